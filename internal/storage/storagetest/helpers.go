package storagetest

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/den-dev/den/internal/storage"
)

// mustCreate creates volume key or fails the test.
func mustCreate(t *testing.T, d storage.Driver, key string) string {
	t.Helper()
	p, err := d.Create(t.Context(), key)
	if err != nil {
		t.Fatalf("Create(%q): %v", key, err)
	}
	if want := d.Path(key); p != want {
		t.Fatalf("Create(%q) returned path %q, Path says %q", key, p, want)
	}
	return p
}

// mustSnapshot snapshots parent as key or fails the test.
func mustSnapshot(t *testing.T, d storage.Driver, parent, key string, readonly bool) string {
	t.Helper()
	p, err := d.Snapshot(t.Context(), parent, key, readonly)
	if err != nil {
		t.Fatalf("Snapshot(%q, %q, %v): %v", parent, key, readonly, err)
	}
	if want := d.Path(key); p != want {
		t.Fatalf("Snapshot(%q, %q) returned path %q, Path says %q", parent, key, p, want)
	}
	return p
}

func mustStat(t *testing.T, d storage.Driver, key string) storage.Info {
	t.Helper()
	info, err := d.Stat(t.Context(), key)
	if err != nil {
		t.Fatalf("Stat(%q): %v", key, err)
	}
	return info
}

func mustRemove(t *testing.T, d storage.Driver, key string) {
	t.Helper()
	if err := d.Remove(t.Context(), key); err != nil {
		t.Fatalf("Remove(%q): %v", key, err)
	}
}

// writeFile writes content to dir/rel, making the directories above it.
func writeFile(t *testing.T, dir, rel, content string) {
	t.Helper()
	p := filepath.Join(dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// wantFile checks that dir/rel holds content.
func wantFile(t *testing.T, dir, rel, content string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, rel))
	if err != nil {
		t.Errorf("reading %s: %v", rel, err)
		return
	}
	if string(b) != content {
		t.Errorf("%s holds %q, want %q", rel, b, content)
	}
}

// wantAbsent checks that dir/rel does not exist.
func wantAbsent(t *testing.T, dir, rel string) {
	t.Helper()
	if _, err := os.Lstat(filepath.Join(dir, rel)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s: want it absent, Lstat says %v", rel, err)
	}
}

// wantClass checks that err belongs to class.
func wantClass(t *testing.T, what string, err, class error) {
	t.Helper()
	if !errors.Is(err, class) {
		t.Errorf("%s: error %v, want %v", what, err, class)
	}
}

// wantWriteRefused checks that the kernel refuses to change dir, which holds
// a file named existing.
func wantWriteRefused(t *testing.T, dir, existing string) {
	t.Helper()
	refused := func(what string, err error) {
		if !errors.Is(err, syscall.EROFS) && !errors.Is(err, syscall.EPERM) {
			t.Errorf("%s in a read-only volume: error %v, want EROFS or EPERM", what, err)
		}
	}
	refused("creating a file", os.WriteFile(filepath.Join(dir, "new-file"), []byte("x"), 0o644))
	f, err := os.OpenFile(filepath.Join(dir, existing), os.O_WRONLY, 0)
	if err == nil {
		f.Close()
	}
	refused("opening a file for writing", err)
	refused("removing a file", os.Remove(filepath.Join(dir, existing)))
	refused("making a directory", os.Mkdir(filepath.Join(dir, "new-dir"), 0o755))
}

// keys lists the keys of infos.
func keys(infos []storage.Info) []string {
	out := make([]string, 0, len(infos))
	for _, i := range infos {
		out = append(out, i.Key)
	}
	return out
}

// digest describes every entry under root: type, mode, owner, content (or
// link target), modification time of files, and which files share an
// inode. Two trees with equal digests hold the same thing.
func digest(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	inodes := map[uint64]string{} // inode → first path seen with it
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		fi, err := e.Info()
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		desc := fmt.Sprintf("%v uid=%d gid=%d", fi.Mode(), st.Uid, st.Gid)
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			desc += " -> " + target
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(b)
			desc += fmt.Sprintf(" size=%d sha=%s mtime=%d", len(b), hex.EncodeToString(sum[:8]), fi.ModTime().UnixNano())
			if st.Nlink > 1 {
				if first, ok := inodes[st.Ino]; ok {
					desc += " link-of=" + first
				} else {
					inodes[st.Ino] = rel
				}
			}
		}
		out[rel] = desc
		return nil
	})
	if err != nil {
		t.Fatalf("reading tree: %v", err)
	}
	return out
}

// sameTree checks that two trees hold the same thing.
func sameTree(t *testing.T, want, got map[string]string) {
	t.Helper()
	var diffs []string
	for k, w := range want {
		if g, ok := got[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("missing %s", k))
		} else if g != w {
			diffs = append(diffs, fmt.Sprintf("%s: %s, want %s", k, g, w))
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("extra %s", k))
		}
	}
	if len(diffs) > 0 {
		sort.Strings(diffs)
		if len(diffs) > 10 {
			diffs = append(diffs[:10], fmt.Sprintf("... and %d more", len(diffs)-10))
		}
		t.Errorf("trees differ:\n%s", strings.Join(diffs, "\n"))
	}
}

// poolEntries lists the names in the pool's root that could be keys.
func poolEntries(t *testing.T, d storage.Driver) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Dir(d.Path("probe")))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), ".") {
			names = append(names, e.Name())
		}
	}
	return names
}
