package files

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

type entry struct {
	name, body, link string
	typ              byte
	mode             int64
}

func makeTar(t *testing.T, entries ...entry) *bytes.Buffer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		if e.typ == 0 {
			e.typ = tar.TypeReg
		}
		if e.mode == 0 {
			e.mode = 0o644
		}
		hdr := &tar.Header{Name: e.name, Typeflag: e.typ, Mode: e.mode, Size: int64(len(e.body)), Linkname: e.link}
		if e.typ != tar.TypeReg {
			hdr.Size = 0
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if e.typ == tar.TypeReg {
			if _, err := io.WriteString(tw, e.body); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return &buf
}

func TestExtractTarRejectsEscapes(t *testing.T) {
	tests := map[string][]entry{
		"dot-dot":            {{name: "../evil", body: "x"}},
		"dot-dot inside":     {{name: "a/../../evil", body: "x"}},
		"absolute":           {{name: "/tmp/evil", body: "x"}},
		"symlink then write": {{name: "link", typ: tar.TypeSymlink, link: "OUTSIDE"}, {name: "link/evil", body: "x"}},
		"relative symlink":   {{name: "up", typ: tar.TypeSymlink, link: "../.."}, {name: "up/evil", body: "x"}},
		"symlink overwrite":  {{name: "f", typ: tar.TypeSymlink, link: "OUTSIDE/evil"}, {name: "f/", typ: tar.TypeDir}, {name: "f/x", body: "x"}},
		"hardlink out":       {{name: "h", typ: tar.TypeLink, link: "../secret"}},
		"dir via symlink":    {{name: "d", typ: tar.TypeSymlink, link: "OUTSIDE"}, {name: "d/sub/", typ: tar.TypeDir}},
	}
	for name, entries := range tests {
		t.Run(name, func(t *testing.T) {
			base := t.TempDir()
			outside := filepath.Join(base, "outside")
			target := filepath.Join(base, "target")
			for _, d := range []string{outside, target} {
				if err := os.Mkdir(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.WriteFile(filepath.Join(base, "secret"), []byte("s"), 0o600); err != nil {
				t.Fatal(err)
			}
			for i := range entries {
				if entries[i].link == "OUTSIDE" {
					entries[i].link = outside
				} else if entries[i].link == "OUTSIDE/evil" {
					entries[i].link = filepath.Join(outside, "evil")
				}
			}
			err := extractTar(makeTar(t, entries...), target)
			if err == nil {
				t.Fatal("a malicious archive was extracted without error")
			}
			t.Logf("refused: %v", err)
			// Nothing was written outside the target.
			for _, p := range []string{filepath.Join(base, "evil"), filepath.Join(outside, "evil"), filepath.Join(outside, "sub"), "/tmp/evil"} {
				if _, err := os.Lstat(p); err == nil {
					t.Errorf("%s exists after extraction (err was %v)", p, err)
				}
			}
			if ents, _ := os.ReadDir(outside); len(ents) != 0 {
				t.Errorf("the outside directory got %d entries", len(ents))
			}
		})
	}
}

func TestExtractTarNamesTheUnsafeEntry(t *testing.T) {
	err := extractTar(makeTar(t, entry{name: "ok", body: "x"}, entry{name: "../evil", body: "x"}), t.TempDir())
	if !errors.Is(err, errUnsafeEntry) || err.Error() != `unsafe archive entry "../evil": it points outside the target directory` {
		t.Fatalf("err = %v", err)
	}
}

func TestTarRoundTrip(t *testing.T) {
	src := t.TempDir()
	mustWrite := func(p, body string, mode fs.FileMode) {
		t.Helper()
		full := filepath.Join(src, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(body), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(full, mode); err != nil {
			t.Fatal(err)
		}
	}
	mustWrite("top.txt", "top", 0o644)
	mustWrite("bin/run.sh", "#!/bin/sh\necho hi\n", 0o755)
	mustWrite("deep/er/still/file", "deep", 0o600)
	if err := os.Mkdir(filepath.Join(src, "empty"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../top.txt", filepath.Join(src, "bin", "top-link")); err != nil {
		t.Fatal(err)
	}
	// An absolute link is data: it is recreated, never followed.
	if err := os.Symlink("/etc/passwd", filepath.Join(src, "abs-link")); err != nil {
		t.Fatal(err)
	}

	var buf bytes.Buffer
	var counted bytes.Buffer
	if err := writeTar(&buf, src, &counted); err != nil {
		t.Fatalf("writeTar: %v", err)
	}
	if got, want := int64(counted.Len()), treeSize(src); got != want {
		t.Errorf("progress counted %d bytes, tree has %d", got, want)
	}
	dst := t.TempDir()
	// Existing files are replaced.
	if err := os.WriteFile(filepath.Join(dst, "top.txt"), []byte("old contents, longer"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := extractTar(&buf, dst); err != nil {
		t.Fatalf("extractTar: %v", err)
	}

	for p, want := range map[string]string{"top.txt": "top", "bin/run.sh": "#!/bin/sh\necho hi\n", "deep/er/still/file": "deep", "bin/top-link": "top"} {
		got, err := os.ReadFile(filepath.Join(dst, p))
		if err != nil || string(got) != want {
			t.Errorf("%s = %q, %v; want %q", p, got, err, want)
		}
	}
	for p, want := range map[string]fs.FileMode{"bin/run.sh": 0o755, "deep/er/still/file": 0o600, "empty": 0o750 | fs.ModeDir, "top.txt": 0o644} {
		fi, err := os.Lstat(filepath.Join(dst, p))
		if err != nil || fi.Mode() != want {
			t.Errorf("%s mode = %v, %v; want %v", p, fi.Mode(), err, want)
		}
	}
	if l, err := os.Readlink(filepath.Join(dst, "abs-link")); err != nil || l != "/etc/passwd" {
		t.Errorf("abs-link -> %q, %v", l, err)
	}
}
