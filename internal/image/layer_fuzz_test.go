package image

import (
	"archive/tar"
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// FuzzApplyLayer applies arbitrary bytes as a tar layer, twice (so the
// second pass meets what the first left, symlinks included), onto a root
// beside a sentinel directory and a symlink to it. Whatever the input, the
// applier must not panic and nothing outside the root may change.
//
//	go test -run '^$' -fuzz FuzzApplyLayer -fuzztime 5m -fuzzminimizetime 10s ./internal/image
//
// (While it minimizes a new input, which is most of its first minutes, the
// exec rate it shows is 0/sec.)
func FuzzApplyLayer(f *testing.F) {
	for _, seed := range fuzzSeeds(f) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		base := t.TempDir()
		root, outside := filepath.Join(base, "root"), filepath.Join(base, "outside")
		for _, d := range []string{root, outside} {
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(outside, "keep"), []byte("keep"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("outside", filepath.Join(base, "ptr")); err != nil {
			t.Fatal(err)
		}
		before := describeOutside(t, base)

		a, err := newApplier(root, applyOptions{chown: os.Geteuid() == 0, whiteouts: true, maxBytes: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			_ = a.Apply(context.Background(), bytes.NewReader(data))
		}
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}

		if fi, err := os.Lstat(root); err != nil || !fi.IsDir() {
			t.Fatalf("the root is no longer a directory: %v %v", fi, err)
		}
		after := describeOutside(t, base)
		for k, v := range before {
			if after[k] != v {
				t.Errorf("outside the root, %s changed: %q -> %q", k, v, after[k])
			}
		}
		for k, v := range after {
			if _, ok := before[k]; !ok {
				t.Errorf("outside the root, %s appeared: %q", k, v)
			}
		}
	})
}

// describeOutside describes everything under base except root/, with
// modes, owners and times, so any change shows.
func describeOutside(t *testing.T, base string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(base, p)
		if rel == "root" {
			return filepath.SkipDir
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		desc := fi.Mode().String() + " " + fi.ModTime().String()
		if fi.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			desc += " " + string(b)
		}
		out[rel] = desc
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func fuzzSeeds(f *testing.F) [][]byte {
	tool := file("bin/tool", "tool")
	tool.mode = 0o4755
	return [][]byte{
		tarOf(f, dir("etc/"), file("etc/a", "a"), tool, hardlink("bin/t2", "bin/tool"), symlink("s", "bin/tool")),
		tarOf(f, dir("d/"), file("d/x", "x"), file("d/.wh..wh..opq", ""), file(".wh.etc", ""), file("d/y", "y")),
		tarOf(f, symlink("l", "../outside"), file("l/pwn", "x")),
		tarOf(f, symlink("l", "/"), dir("l/tmp/"), file("l/tmp/pwn", "x")),
		tarOf(f, symlink("p", "../ptr"), file("p/keep", "x"), file("p/.wh.keep", ""), file("p/.wh..wh..opq", "")),
		tarOf(f, file("../outside/keep", "x"), file("/abs", "x"), hardlink("h", "../outside/keep")),
		tarOf(f, symlink("k", "../outside/keep"), hardlink("h", "k"), file("h", "x"), file("k", "y")),
		tarOf(f, dir("./"), dir("a/b/c/"), ent{name: "a/b/c/dev", typ: tar.TypeChar}, ent{name: "fifo", typ: tar.TypeFifo}),
		tarOf(f, file(".wh...", ""), file("a/.wh..", ""), file("a/../../x", "x")),
	}
}
