package image

import (
	"archive/tar"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/den-dev/den/internal/errdefs"
)

// applyAll applies layers in order onto a fresh root and returns it.
func applyAll(t *testing.T, root string, opts applyOptions, layers ...[]byte) error {
	t.Helper()
	a, err := newApplier(root, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	for _, l := range layers {
		if err := a.Apply(context.Background(), bytes.NewReader(l)); err != nil {
			return err
		}
	}
	return nil
}

var layerOpts = applyOptions{chown: os.Geteuid() == 0, whiteouts: true}

func TestApplyLayers(t *testing.T) {
	tool := file("bin/tool", "tool")
	tool.mode = 0o755
	l1 := tarOf(t,
		dir("etc/"), file("etc/keep", "keep"), file("etc/gone", "gone"),
		dir("opq/"), file("opq/old", "old"), dir("opq/sub/"), file("opq/sub/deep", "deep"),
		dir("bin/"), tool,
		dir("wd/"), file("wd/f", "f"),
	)
	owned := file("home/u/f", "f")
	owned.mode, owned.uid, owned.gid = 0o640, 1000, 1001
	setuid := file("etc/setuid", "s")
	setuid.mode = 0o4755
	l2 := tarOf(t,
		file("opq/new", "new"), // before the opaque marker: still kept
		dir("opq/sub/"), file("opq/sub/fresh", "fresh"),
		file("opq/.wh..wh..opq", ""),
		file("etc/.wh.gone", ""),
		file(".wh.wd", ""),
		hardlink("links/hard", "bin/tool"),
		symlink("links/soft", "../bin/tool"),
		owned, setuid,
	)
	root := t.TempDir()
	if err := applyAll(t, root, layerOpts, l1, l2); err != nil {
		t.Fatal(err)
	}
	diffTrees(t, tree(t, root), map[string]string{
		"etc":           "dir 0755",
		"etc/keep":      "file 0644 keep",
		"etc/setuid":    "file 4755 s",
		"opq":           "dir 0755",
		"opq/new":       "file 0644 new",
		"opq/sub":       "dir 0755",
		"opq/sub/fresh": "file 0644 fresh",
		"bin":           "dir 0755",
		"bin/tool":      "file 0755 tool",
		"links":         "dir 0755",
		"links/hard":    "file 0755 tool",
		"links/soft":    "link -> ../bin/tool",
		"home":          "dir 0755",
		"home/u":        "dir 0755",
		"home/u/f":      "file 0640 f",
	})

	var tl, hl, f syscall.Stat_t
	mustLstat(t, filepath.Join(root, "bin/tool"), &tl)
	mustLstat(t, filepath.Join(root, "links/hard"), &hl)
	if tl.Ino != hl.Ino {
		t.Error("links/hard is not a hard link of bin/tool")
	}
	mustLstat(t, filepath.Join(root, "home/u/f"), &f)
	if os.Geteuid() == 0 && (f.Uid != 1000 || f.Gid != 1001) {
		t.Errorf("home/u/f owned by %d:%d, want 1000:1001", f.Uid, f.Gid)
	}
	for _, p := range []string{"etc/keep", "opq/sub", "links/soft"} {
		fi, err := os.Lstat(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		if !fi.ModTime().Equal(testTime) {
			t.Errorf("%s: mtime %v, want %v", p, fi.ModTime(), testTime)
		}
	}
}

func mustLstat(t *testing.T, p string, st *syscall.Stat_t) {
	t.Helper()
	if err := syscall.Lstat(p, st); err != nil {
		t.Fatal(err)
	}
}

// The OCI spec: whiteouts never hide entries of their own layer, wherever
// they are in the tar.
func TestWhiteoutsSpareTheirOwnLayer(t *testing.T) {
	lower := tarOf(t, dir("d/"), file("d/old", "old"), dir("d/sub/"), file("d/sub/old", "old"), file("x", "x"))
	orders := map[string][]ent{
		"marker first": {file("d/.wh..wh..opq", ""), file("d/sub/new", "new"), file("x", "new x"), file(".wh.x", "")},
		"marker last":  {file("d/sub/new", "new"), file(".wh.x", ""), file("x", "new x"), file("d/.wh..wh..opq", "")},
	}
	for name, upper := range orders {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			if err := applyAll(t, root, layerOpts, lower, tarOf(t, upper...)); err != nil {
				t.Fatal(err)
			}
			diffTrees(t, tree(t, root), map[string]string{
				"d":         "dir 0755",
				"d/sub":     "dir 0755",
				"d/sub/new": "file 0644 new",
				"x":         "file 0644 new x",
			})
		})
	}
}

func TestApplyReplacesWhatIsInTheWay(t *testing.T) {
	root := t.TempDir()
	l1 := tarOf(t, dir("d/"), file("d/f", "f"), file("e", "e"), symlink("s", "/etc/passwd"), symlink("sd", "/etc"))
	l2 := tarOf(t, file("d", "now a file"), dir("e/"), file("e/g", "g"), file("s", "not through"), dir("sd/"))
	if err := applyAll(t, root, layerOpts, l1, l2); err != nil {
		t.Fatal(err)
	}
	diffTrees(t, tree(t, root), map[string]string{
		"d":   "file 0644 now a file",
		"e":   "dir 0755",
		"e/g": "file 0644 g",
		"s":   "file 0644 not through",
		"sd":  "dir 0755",
	})
}

func TestApplySkipsSpecialFiles(t *testing.T) {
	root := t.TempDir()
	l := tarOf(t,
		ent{name: "dev/null", typ: tar.TypeChar, mode: 0o666},
		ent{name: "dev/sda", typ: tar.TypeBlock, mode: 0o660},
		ent{name: "fifo", typ: tar.TypeFifo, mode: 0o644},
		file("ok", "ok"),
	)
	if err := applyAll(t, root, layerOpts, l); err != nil {
		t.Fatal(err)
	}
	diffTrees(t, tree(t, root), map[string]string{"ok": "file 0644 ok"})
}

func TestApplyOddEntriesAreInvalid(t *testing.T) {
	for name, l := range map[string][]byte{
		"empty symlink target": tarOf(t, symlink("s", "")),
		"name too long":        tarOf(t, file(strings.Repeat("n", 300), "x")),
		"hard link to a dir":   tarOf(t, dir("d/"), hardlink("h", "d")),
		"hard link to nothing": tarOf(t, hardlink("h", "missing")),
	} {
		t.Run(name, func(t *testing.T) {
			err := applyAll(t, t.TempDir(), layerOpts, l)
			t.Log(err)
			assertClass(t, err, errdefs.ErrInvalid)
		})
	}
}

func TestApplyByteCap(t *testing.T) {
	root := t.TempDir()
	err := applyAll(t, root, applyOptions{whiteouts: true, maxBytes: 10}, tarOf(t, file("a", "12345")), tarOf(t, file("b", "123456")))
	assertClass(t, err, errdefs.ErrTooLarge)
}

func TestApplyDamagedStream(t *testing.T) {
	l := tarOf(t, file("a", "some content that is long enough"), file("b", "more"))
	for name, data := range map[string][]byte{
		"truncated": l[:520], // in the middle of a's content
		"garbage":   bytes.Repeat([]byte("not a tar "), 100),
	} {
		t.Run(name, func(t *testing.T) {
			err := applyAll(t, t.TempDir(), layerOpts, data)
			assertClass(t, err, errdefs.ErrInvalid)
		})
	}
}

func TestApplyStopsWhenCancelled(t *testing.T) {
	a, err := newApplier(t.TempDir(), layerOpts)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := a.Apply(ctx, bytes.NewReader(tarOf(t, file("a", "a")))); err != context.Canceled {
		t.Fatalf("got %v, want context.Canceled", err)
	}
}

// Hostile layers: each either fails or is made harmless, and nothing
// outside the root changes.
func TestApplyHostileLayers(t *testing.T) {
	cases := []struct {
		name    string
		layers  func(t *testing.T, outside string) [][]byte
		wantErr bool
	}{
		{"dot-dot name", one(file("../escape", "x")), true},
		{"dot-dot inside name", one(file("a/../../escape", "x")), true},
		{"absolute name", func(t *testing.T, o string) [][]byte { return [][]byte{tarOf(t, file(o+"/abs", "x"))} }, true},
		{"write through a symlink of the same layer", func(t *testing.T, o string) [][]byte {
			return [][]byte{tarOf(t, symlink("l", o), file("l/pwn", "x"))}
		}, true},
		{"write through a relative symlink", one(symlink("l", "../outside"), file("l/pwn", "x")), true},
		{"write through a symlink of a lower layer", func(t *testing.T, o string) [][]byte {
			return [][]byte{tarOf(t, symlink("l", o)), tarOf(t, file("l/pwn", "x"))}
		}, true},
		{"mkdir through a symlink", func(t *testing.T, o string) [][]byte {
			return [][]byte{tarOf(t, symlink("l", o)), tarOf(t, dir("l/sub/"))}
		}, true},
		{"replace a symlink to a file outside", func(t *testing.T, o string) [][]byte {
			return [][]byte{tarOf(t, symlink("l", o+"/keep")), tarOf(t, file("l", "x"))}
		}, false},
		{"hard link out by dot-dot", one(hardlink("h", "../outside/keep")), true},
		{"hard link to an absolute path", func(t *testing.T, o string) [][]byte {
			return [][]byte{tarOf(t, hardlink("h", o+"/keep"))}
		}, true},
		{"hard link through a symlink", func(t *testing.T, o string) [][]byte {
			return [][]byte{tarOf(t, symlink("l", o)), tarOf(t, hardlink("h", "l/keep"))}
		}, true},
		{"hard link to a symlink, then write it", func(t *testing.T, o string) [][]byte {
			return [][]byte{tarOf(t, symlink("l", o+"/keep"), hardlink("h", "l")), tarOf(t, file("h", "x"))}
		}, false},
		{"whiteout through a symlink", func(t *testing.T, o string) [][]byte {
			return [][]byte{tarOf(t, symlink("l", o)), tarOf(t, file("l/.wh.keep", ""))}
		}, false},
		{"opaque through a symlink", func(t *testing.T, o string) [][]byte {
			return [][]byte{tarOf(t, symlink("l", o)), tarOf(t, file("l/.wh..wh..opq", ""))}
		}, true},
		{"whiteout of dot-dot", one(file(".wh...", "")), true},
		{"whiteout named out", one(file("../.wh.outside", "")), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
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
			before := outsideOf(t, base)
			err := applyAll(t, root, layerOpts, c.layers(t, outside)...)
			if c.wantErr {
				assertClass(t, err, errdefs.ErrInvalid)
			} else if err != nil {
				t.Fatal(err)
			}
			diffTrees(t, outsideOf(t, base), before)
		})
	}
}

func one(ents ...ent) func(*testing.T, string) [][]byte {
	return func(t *testing.T, _ string) [][]byte { return [][]byte{tarOf(t, ents...)} }
}

// outsideOf describes everything under base but root.
func outsideOf(t *testing.T, base string) map[string]string {
	t.Helper()
	m := tree(t, base)
	for k := range m {
		if k == "root" || strings.HasPrefix(k, "root/") {
			delete(m, k)
		}
	}
	return m
}
