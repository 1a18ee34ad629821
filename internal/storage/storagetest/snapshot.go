package storagetest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/storage"
)

// enforcesReadOnly tells whether the kernel refuses writes into d's
// read-only volumes. The copy driver only records read-only.
func enforcesReadOnly(d storage.Driver) bool { return d.Name() == "btrfs" }

func testSnapshotIsolation(t *testing.T, d storage.Driver) {
	parent := mustCreate(t, d, "images/a")
	writeFile(t, parent, "keep.txt", "parent")
	writeFile(t, parent, "gone.txt", "x")
	writeFile(t, parent, "sub/file", "nested")
	child := mustSnapshot(t, d, "images/a", "sandboxes/b", false)
	if mustStat(t, d, "sandboxes/b").ReadOnly {
		t.Fatalf("a writable snapshot is read-only")
	}
	sameTree(t, digest(t, parent), digest(t, child))

	// Changes in the child stay there.
	writeFile(t, child, "keep.txt", "child")
	writeFile(t, child, "new.txt", "only in child")
	if err := os.Remove(filepath.Join(child, "gone.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(child, "sub")); err != nil {
		t.Fatal(err)
	}
	wantFile(t, parent, "keep.txt", "parent")
	wantFile(t, parent, "gone.txt", "x")
	wantFile(t, parent, "sub/file", "nested")
	wantAbsent(t, parent, "new.txt")

	// And changes in the parent stay there.
	writeFile(t, parent, "keep.txt", "parent again")
	writeFile(t, parent, "late.txt", "only in parent")
	if err := os.Remove(filepath.Join(parent, "sub/file")); err != nil {
		t.Fatal(err)
	}
	wantFile(t, child, "keep.txt", "child")
	wantFile(t, child, "new.txt", "only in child")
	wantAbsent(t, child, "late.txt")
	wantAbsent(t, child, "gone.txt")
	wantAbsent(t, child, "sub")

	// Removing the parent leaves the child whole.
	mustRemove(t, d, "images/a")
	wantFile(t, child, "keep.txt", "child")
	wantFile(t, child, "new.txt", "only in child")
}

func testReadOnlySnapshot(t *testing.T, d storage.Driver) {
	src := mustCreate(t, d, "v/src")
	writeFile(t, src, "f", "original")
	ro := mustSnapshot(t, d, "v/src", "v/ro", true)
	if !mustStat(t, d, "v/ro").ReadOnly {
		t.Errorf("Stat of a read-only snapshot: ReadOnly false")
	}
	if mustStat(t, d, "v/src").ReadOnly {
		t.Errorf("taking a read-only snapshot made its parent read-only")
	}
	sameTree(t, digest(t, src), digest(t, ro))
	writeFile(t, src, "f", "changed later")
	wantFile(t, ro, "f", "original")
	if enforcesReadOnly(d) {
		wantWriteRefused(t, ro, "f")
		wantFile(t, ro, "f", "original")
	}

	// A writable snapshot of a read-only one is how a sandbox is made
	// from an image, and how one resumes from a checkpoint.
	rw := mustSnapshot(t, d, "v/ro", "v/rw", false)
	if mustStat(t, d, "v/rw").ReadOnly {
		t.Errorf("a writable snapshot of a read-only volume is read-only")
	}
	writeFile(t, rw, "f", "written in the child")
	writeFile(t, rw, "dir/g", "new")
	wantFile(t, ro, "f", "original")
	wantAbsent(t, ro, "dir")

	// A read-only volume can be removed like any other.
	mustRemove(t, d, "v/ro")
	wantFile(t, rw, "f", "written in the child")
}

func testSeal(t *testing.T, d storage.Driver) {
	ctx := t.Context()
	img := mustCreate(t, d, "images/built")
	writeFile(t, img, "usr/bin/tool", "#!/bin/sh\n")
	writeFile(t, img, "VERSION", "1\n")
	if err := d.Seal(ctx, "images/built"); err != nil {
		t.Fatalf("Seal: %v", err)
	}
	if !mustStat(t, d, "images/built").ReadOnly {
		t.Errorf("Stat after Seal: ReadOnly false")
	}
	if err := d.Seal(ctx, "images/built"); err != nil {
		t.Errorf("sealing a sealed volume: %v", err)
	}
	if enforcesReadOnly(d) {
		wantWriteRefused(t, img, "VERSION")
	}
	sb := mustSnapshot(t, d, "images/built", "sandboxes/one", false)
	wantFile(t, sb, "usr/bin/tool", "#!/bin/sh\n")
	writeFile(t, sb, "home/notes", "mine")
	wantAbsent(t, img, "home")
	mustRemove(t, d, "images/built")
	wantFile(t, sb, "usr/bin/tool", "#!/bin/sh\n")
}

func testSnapshotOfSnapshot(t *testing.T, d storage.Driver) {
	base := mustCreate(t, d, "chain/base")
	writeFile(t, base, "0", "base")
	s1 := mustSnapshot(t, d, "chain/base", "chain/s1", false)
	writeFile(t, s1, "1", "s1")
	mustSnapshot(t, d, "chain/s1", "chain/s2", true)
	writeFile(t, s1, "1", "s1 after s2")
	s3 := mustSnapshot(t, d, "chain/s2", "chain/s3", false)
	writeFile(t, s3, "3", "s3")
	s4 := mustSnapshot(t, d, "chain/s3", "chain/s4", false)

	wantFile(t, s3, "0", "base")
	wantFile(t, s3, "1", "s1")
	wantFile(t, s4, "3", "s3")
	wantAbsent(t, base, "1")
	wantAbsent(t, s1, "3")

	// Every generation stands on its own.
	for _, k := range []string{"chain/base", "chain/s1", "chain/s2", "chain/s3"} {
		mustRemove(t, d, k)
	}
	wantFile(t, s4, "0", "base")
	wantFile(t, s4, "1", "s1")
	wantFile(t, s4, "3", "s3")
}

func testSnapshotKeepsMetadata(t *testing.T, d storage.Driver) {
	src := mustCreate(t, d, "meta/src")
	writeFile(t, src, "bin/run", "#!/bin/sh\necho hi\n")
	writeFile(t, src, "etc/shadow", "root:*:19000::::::\n")
	writeFile(t, src, "data/a", "shared")
	mkdir(t, src, "tmp")
	chmod(t, src, "bin/run", 0o755)
	chmod(t, src, "etc/shadow", 0o600)
	chmod(t, src, "tmp", 0o777|os.ModeSticky)
	if err := os.Link(filepath.Join(src, "data/a"), filepath.Join(src, "data/b")); err != nil {
		t.Fatal(err)
	}
	symlink(t, src, "bin/sh", "run")
	symlink(t, src, "etc/dangling", "/nowhere/at/all")
	if err := syscall.Mkfifo(filepath.Join(src, "tmp/fifo"), 0o640); err != nil {
		t.Fatal(err)
	}
	past := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	if err := os.Chtimes(filepath.Join(src, "etc/shadow"), past, past); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		for _, rel := range []string{"data", "data/a", "etc/dangling"} {
			if err := os.Lchown(filepath.Join(src, rel), 1000, 1001); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := digest(t, src)
	for _, ro := range []bool{false, true} {
		key := fmt.Sprintf("meta/ro-%v", ro)
		sameTree(t, want, digest(t, mustSnapshot(t, d, "meta/src", key, ro)))
	}
	if got := digest(t, d.Path("meta/ro-false"))["data/b"]; !strings.Contains(got, "link-of=data/a") {
		t.Errorf("hard link not kept: data/b is %q", got)
	}
}

func testManyFiles(t *testing.T, d storage.Driver) {
	src := mustCreate(t, d, "many/src")
	const files, dirs = 2000, 40
	for i := range files {
		rel := fmt.Sprintf("d%02d/f%04d", i%dirs, i)
		writeFile(t, src, rel, strings.Repeat(fmt.Sprintf("file %d;", i), 1+i%50))
	}
	want := digest(t, src)
	if len(want) < files {
		t.Fatalf("source holds %d entries, want at least %d", len(want), files)
	}
	rw := mustSnapshot(t, d, "many/src", "many/rw", false)
	ro := mustSnapshot(t, d, "many/src", "many/ro", true)
	sameTree(t, want, digest(t, rw))
	sameTree(t, want, digest(t, ro))

	// The copies are deep: changing one file in the child leaves the
	// rest equal and the parent untouched.
	writeFile(t, rw, "d07/f0007", "changed")
	wantFile(t, src, "d07/f0007", strings.Repeat("file 7;", 8))
	wantFile(t, ro, "d07/f0007", strings.Repeat("file 7;", 8))
}

func testRemoveTree(t *testing.T, d storage.Driver) {
	ctx := t.Context()
	// Something outside the volume that its links point at: Remove must
	// not follow them.
	outside := t.TempDir()
	writeFile(t, outside, "precious", "do not touch")

	p := mustCreate(t, d, "sandboxes/messy")
	writeFile(t, p, "a/b/c/deep", "deep")
	writeFile(t, p, "ro/file", "read-only file")
	writeFile(t, p, "locked/inner/file", "behind a locked directory")
	writeFile(t, p, "owned/file", "someone else's")
	symlink(t, p, "escape", outside)
	symlink(t, p, "a/escape-file", filepath.Join(outside, "precious"))
	symlink(t, p, "dangling", "/no/such/path")
	if err := syscall.Mkfifo(filepath.Join(p, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		for _, rel := range []string{"owned", "owned/file", "escape"} {
			if err := os.Lchown(filepath.Join(p, rel), 12345, 12345); err != nil {
				t.Fatal(err)
			}
		}
	}
	chmod(t, p, "ro/file", 0o444)
	chmod(t, p, "ro", 0o555)
	chmod(t, p, "locked/inner", 0o500)
	chmod(t, p, "locked", 0o500)
	chmod(t, p, ".", 0o555)

	mustSnapshot(t, d, "sandboxes/messy", "checkpoints/messy", true)
	for _, key := range []string{"sandboxes/messy", "checkpoints/messy"} {
		path := d.Path(key)
		mustRemove(t, d, key)
		_, err := d.Stat(ctx, key)
		wantClass(t, "Stat after Remove", err, errdefs.ErrNotFound)
		if _, err := os.Lstat(path); !os.IsNotExist(err) {
			t.Errorf("%s: its directory is still there after Remove (%v)", key, err)
		}
	}
	wantFile(t, outside, "precious", "do not touch")
}

func mkdir(t *testing.T, dir, rel string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, rel), 0o755); err != nil {
		t.Fatal(err)
	}
}

func chmod(t *testing.T, dir, rel string, mode os.FileMode) {
	t.Helper()
	if err := os.Chmod(filepath.Join(dir, rel), mode); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, dir, rel, target string) {
	t.Helper()
	if err := os.Symlink(target, filepath.Join(dir, rel)); err != nil {
		t.Fatal(err)
	}
}
