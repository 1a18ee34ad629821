package files

import (
	"archive/tar"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/den-dev/den/internal/errdefs"
)

type tarEntry struct {
	name, link string
	typ        byte
	body       string
}

func makeTar(t testing.TB, entries ...tarEntry) []byte {
	return makeTarOpt(t, true, entries...)
}

// makeTarOpt builds a tar; without the end-of-archive blocks when !closed
// (extraction accepts that, and fuzzing likes small inputs).
func makeTarOpt(t testing.TB, closed bool, entries ...tarEntry) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		mode := int64(0o644)
		if e.typ == tar.TypeDir {
			mode = 0o755
		}
		if err := tw.WriteHeader(&tar.Header{Name: e.name, Linkname: e.link, Typeflag: e.typ, Mode: mode, Size: int64(len(e.body))}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(e.body))
	}
	if closed {
		tw.Close()
	} else {
		tw.Flush()
	}
	return buf.Bytes()
}

// sandboxDirs makes base/outside/victim and base/dir, and returns a check
// that nothing but base/dir changed.
func sandboxDirs(t testing.TB) (dir string, unchanged func() error) {
	base := t.TempDir()
	outside := filepath.Join(base, "outside")
	dir = filepath.Join(base, "dir")
	for _, err := range []error{
		os.Mkdir(outside, 0o755),
		os.WriteFile(filepath.Join(outside, "victim"), []byte("safe"), 0o644),
		os.Mkdir(dir, 0o755),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	return dir, func() error {
		if ents, _ := os.ReadDir(base); len(ents) != 2 {
			return errors.New("something was written beside the directory")
		}
		if ents, _ := os.ReadDir(outside); len(ents) != 1 {
			return errors.New("something was written in the outside directory")
		}
		fi, err := os.Lstat(filepath.Join(outside, "victim"))
		if err != nil || !fi.Mode().IsRegular() {
			return errors.New("the outside file was replaced")
		}
		if b, _ := os.ReadFile(filepath.Join(outside, "victim")); string(b) != "safe" {
			return errors.New("the outside file was written")
		}
		return nil
	}
}

func TestExtractThroughExistingSymlink(t *testing.T) {
	dir, unchanged := sandboxDirs(t)
	// A symlink already in the tree, pointing out of it.
	if err := os.Symlink("../outside", filepath.Join(dir, "lnk")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(filepath.Dir(dir), "outside"), filepath.Join(dir, "abs")); err != nil {
		t.Fatal(err)
	}
	err := extract(dir, bytes.NewReader(makeTar(t,
		tarEntry{name: "lnk/victim", typ: tar.TypeReg, body: "pwned"},
		tarEntry{name: "abs/victim", typ: tar.TypeReg, body: "pwned"},
		tarEntry{name: "lnk/sub/", typ: tar.TypeDir},
	)))
	if err != nil {
		t.Fatal(err)
	}
	if err := unchanged(); err != nil {
		t.Fatal(err)
	}
	// "../outside" from dir's root is dir/outside.
	if b, err := os.ReadFile(filepath.Join(dir, "outside", "victim")); err != nil || string(b) != "pwned" {
		t.Fatalf("contained write: %q, %v", b, err)
	}
}

func TestExtractRefusals(t *testing.T) {
	tests := []struct {
		name    string
		entries []tarEntry
	}{
		{"absolute", []tarEntry{{name: "/etc/x", typ: tar.TypeReg}}},
		{"dot dot", []tarEntry{{name: "../x", typ: tar.TypeReg}}},
		{"hard link out", []tarEntry{{name: "h", link: "../outside/victim", typ: tar.TypeLink}}},
		{"hard link absolute", []tarEntry{{name: "h", link: "/etc/passwd", typ: tar.TypeLink}}},
		{"device", []tarEntry{{name: "null", typ: tar.TypeChar}}},
		{"root as file", []tarEntry{{name: ".", typ: tar.TypeReg}}},
		{"garbage", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir, unchanged := sandboxDirs(t)
			data := makeTar(t, tt.entries...)
			if tt.entries == nil {
				data = bytes.Repeat([]byte("not a tar "), 100)
			}
			err := extract(dir, bytes.NewReader(data))
			if !errors.Is(err, errdefs.ErrInvalid) {
				t.Fatalf("extract = %v, want invalid", err)
			}
			if err := unchanged(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestExtractReplaces(t *testing.T) {
	dir, _ := sandboxDirs(t)
	os.WriteFile(filepath.Join(dir, "f"), []byte("old"), 0o600)
	os.Mkdir(filepath.Join(dir, "emptydir"), 0o755)
	err := extract(dir, bytes.NewReader(makeTar(t,
		tarEntry{name: "f", typ: tar.TypeReg, body: "new"},
		tarEntry{name: "emptydir", typ: tar.TypeSymlink, link: "f"},
		tarEntry{name: "fifo", typ: tar.TypeFifo},
		tarEntry{name: "./", typ: tar.TypeDir},
	)))
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "emptydir")); string(b) != "new" {
		t.Fatalf("replaced content: %q", b)
	}
	if fi, _ := os.Lstat(filepath.Join(dir, "fifo")); fi == nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Fatal("fifo not made")
	}
}

// FuzzExtract feeds arbitrary bytes to the extractor: whatever they hold,
// nothing outside the target directory changes. Each input touches the
// file system, so minimizing is slow; bound it:
//
//	go test -run '^$' -fuzz FuzzExtract -fuzzminimizetime 200x ./internal/initd/files
func FuzzExtract(f *testing.F) {
	seeds := [][]tarEntry{
		{{name: "a", typ: tar.TypeReg, body: "x"}, {name: "d/", typ: tar.TypeDir}, {name: "d/b", typ: tar.TypeReg, body: "y"}},
		{{name: "s", link: "../outside", typ: tar.TypeSymlink}, {name: "s/victim", typ: tar.TypeReg, body: "pwned"}},
		{{name: "s", link: "..", typ: tar.TypeSymlink}, {name: "s/outside/victim", typ: tar.TypeReg, body: "pwned"}},
		{{name: "s", link: "/", typ: tar.TypeSymlink}, {name: "s/x", typ: tar.TypeReg, body: "pwned"}},
		{{name: "s", link: "s2/..", typ: tar.TypeSymlink}, {name: "s2", link: "../..", typ: tar.TypeSymlink}, {name: "s/x/y", typ: tar.TypeReg}},
		{{name: "loop", link: "loop", typ: tar.TypeSymlink}, {name: "loop/x", typ: tar.TypeReg}},
		{{name: "a", typ: tar.TypeReg, body: "x"}, {name: "h", link: "a", typ: tar.TypeLink}},
		{{name: "h", link: "../outside/victim", typ: tar.TypeLink}},
		{{name: "s", link: "../outside/victim", typ: tar.TypeSymlink}, {name: "h", link: "s", typ: tar.TypeLink}, {name: "h", typ: tar.TypeReg, body: "p"}},
		{{name: "../outside/victim", typ: tar.TypeReg, body: "pwned"}},
	}
	for _, s := range seeds {
		f.Add(makeTarOpt(f, false, s...))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		dir, unchanged := sandboxDirs(t)
		_ = extract(dir, bytes.NewReader(data))
		if err := unchanged(); err != nil {
			t.Fatal(err)
		}
	})
}
