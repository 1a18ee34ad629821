// Package storagetest is the conformance suite every storage driver must
// pass: one set of behaviours, run against btrfs and copy alike.
package storagetest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/storage"
)

// Run runs the suite. newDriver must return a driver over an empty pool of
// its own (every subtest calls it once) and clean up after it through
// t.Cleanup.
func Run(t *testing.T, newDriver func(t *testing.T) storage.Driver) {
	tests := []struct {
		name string
		fn   func(*testing.T, storage.Driver)
	}{
		{"CreateStatListRemove", testCreateStatListRemove},
		{"SnapshotIsolation", testSnapshotIsolation},
		{"ReadOnlySnapshot", testReadOnlySnapshot},
		{"Seal", testSeal},
		{"SnapshotOfSnapshot", testSnapshotOfSnapshot},
		{"SnapshotKeepsMetadata", testSnapshotKeepsMetadata},
		{"ManyFiles", testManyFiles},
		{"Conflict", testConflict},
		{"Concurrent", testConcurrent},
		{"NotFound", testNotFound},
		{"InvalidKeys", testInvalidKeys},
		{"RemoveTree", testRemoveTree},
		{"Usage", testUsage},
		{"List", testList},
		{"Limit", testLimit},
		{"PoolUsage", testPoolUsage},
		{"Move", testMove},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.fn(t, newDriver(t)) })
	}
}

func testCreateStatListRemove(t *testing.T, d storage.Driver) {
	ctx := t.Context()
	p := mustCreate(t, d, "images/base")
	entries, err := os.ReadDir(p)
	if err != nil {
		t.Fatalf("reading a new volume: %v", err)
	}
	if len(entries) != 0 {
		t.Fatalf("a new volume holds %d entries, want none", len(entries))
	}
	writeFile(t, p, "etc/hostname", "den\n")
	wantFile(t, p, "etc/hostname", "den\n")

	if got, want := mustStat(t, d, "images/base"), (storage.Info{Key: "images/base", Path: p}); got != want {
		t.Errorf("Stat = %+v, want %+v", got, want)
	}
	list, err := d.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0] != (storage.Info{Key: "images/base", Path: p}) {
		t.Errorf("List = %+v, want just images/base", list)
	}

	mustRemove(t, d, "images/base")
	_, err = d.Stat(ctx, "images/base")
	wantClass(t, "Stat after Remove", err, errdefs.ErrNotFound)
	if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the volume's directory is still there after Remove (%v)", err)
	}
	if list, _ := d.List(ctx, ""); len(list) != 0 {
		t.Errorf("List after Remove = %v", keys(list))
	}
	wantClass(t, "second Remove", d.Remove(ctx, "images/base"), errdefs.ErrNotFound)

	// The key can be used again, and comes back empty and writable.
	p = mustCreate(t, d, "images/base")
	wantAbsent(t, p, "etc")
	if info := mustStat(t, d, "images/base"); info.ReadOnly {
		t.Errorf("a re-created volume is read-only")
	}
}

func testConflict(t *testing.T, d storage.Driver) {
	ctx := t.Context()
	p := mustCreate(t, d, "a/b")
	writeFile(t, p, "mine", "kept")
	mustCreate(t, d, "c")

	_, err := d.Create(ctx, "a/b")
	wantClass(t, "Create of an existing key", err, errdefs.ErrConflict)
	_, err = d.Snapshot(ctx, "c", "a/b", false)
	wantClass(t, "Snapshot onto an existing key", err, errdefs.ErrConflict)
	_, err = d.Snapshot(ctx, "a/b", "a/b", true)
	wantClass(t, "Snapshot onto itself", err, errdefs.ErrConflict)
	wantFile(t, p, "mine", "kept")
	if mustStat(t, d, "a/b").ReadOnly {
		t.Errorf("a refused read-only snapshot onto a/b made it read-only")
	}

	// "a" is the directory that holds a/b, not a free key.
	_, err = d.Create(ctx, "a")
	wantClass(t, "Create over a directory of volumes", err, errdefs.ErrConflict)
	_, err = d.Snapshot(ctx, "c", "a", false)
	wantClass(t, "Snapshot over a directory of volumes", err, errdefs.ErrConflict)

	// A volume cannot be made inside another.
	_, err = d.Create(ctx, "c/d")
	wantClass(t, "Create inside a volume", err, errdefs.ErrConflict)
	_, err = d.Snapshot(ctx, "c", "c/d", false)
	wantClass(t, "Snapshot inside its own parent", err, errdefs.ErrConflict)
	_, err = d.Create(ctx, "a/b/c/d")
	wantClass(t, "Create deep inside a volume", err, errdefs.ErrConflict)
	wantAbsent(t, d.Path("c"), "d")
	wantAbsent(t, p, "c")
}

func testConcurrent(t *testing.T, d storage.Driver) {
	ctx := t.Context()
	parent := mustCreate(t, d, "images/base")
	writeFile(t, parent, "f", "base")

	// Many creators race for one key: exactly one wins.
	const n = 8
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if i%2 == 0 {
				_, errs[i] = d.Create(ctx, "race/x")
			} else {
				_, errs[i] = d.Snapshot(ctx, "images/base", "race/x", false)
			}
		})
	}
	wg.Wait()
	won := 0
	for i, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, errdefs.ErrConflict):
			t.Errorf("racer %d: %v, want success or ErrConflict", i, err)
		}
	}
	if won != 1 {
		t.Errorf("%d racers made race/x, want exactly 1", won)
	}

	// Snapshots of one parent into distinct keys all succeed.
	for i := range n {
		wg.Go(func() {
			_, errs[i] = d.Snapshot(ctx, "images/base", fmt.Sprintf("sandboxes/s%d", i), i%2 == 0)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("snapshot %d: %v", i, err)
			continue
		}
		wantFile(t, d.Path(fmt.Sprintf("sandboxes/s%d", i)), "f", "base")
	}
}

func testNotFound(t *testing.T, d storage.Driver) {
	ctx := t.Context()
	_, err := d.Stat(ctx, "nope")
	wantClass(t, "Stat", err, errdefs.ErrNotFound)
	wantClass(t, "Remove", d.Remove(ctx, "nope"), errdefs.ErrNotFound)
	wantClass(t, "Seal", d.Seal(ctx, "nope"), errdefs.ErrNotFound)
	_, err = d.Usage(ctx, "nope")
	wantClass(t, "Usage", err, errdefs.ErrNotFound)
	_, err = d.Snapshot(ctx, "nope", "child", false)
	wantClass(t, "Snapshot of a missing parent", err, errdefs.ErrNotFound)
	_, err = d.Stat(ctx, "child")
	wantClass(t, "Stat of a snapshot that failed", err, errdefs.ErrNotFound)

	p := mustCreate(t, d, "dir/vol")
	writeFile(t, p, "etc/passwd", "root:x:0:0::/root:/bin/sh\n")
	// Neither the directory above a volume nor one inside it is a volume.
	for _, key := range []string{"dir", "dir/vol/etc", "dir/other"} {
		_, err := d.Stat(ctx, key)
		wantClass(t, "Stat("+key+")", err, errdefs.ErrNotFound)
		wantClass(t, "Remove("+key+")", d.Remove(ctx, key), errdefs.ErrNotFound)
		wantClass(t, "Seal("+key+")", d.Seal(ctx, key), errdefs.ErrNotFound)
		_, err = d.Snapshot(ctx, key, "x", false)
		wantClass(t, "Snapshot("+key+")", err, errdefs.ErrNotFound)
	}
	wantFile(t, p, "etc/passwd", "root:x:0:0::/root:/bin/sh\n")
	if mustStat(t, d, "dir/vol").ReadOnly {
		t.Errorf("dir/vol became read-only")
	}
}

func testInvalidKeys(t *testing.T, d storage.Driver) {
	ctx := t.Context()
	mustCreate(t, d, "parent")
	bad := []string{
		"", "/abs", "/", "a/../b", "..", "../x", ".hidden", "A", "images/Debian",
		"a//b", "a/", "a/b/c/d/e", "-a", "a b", "a\x00b", strings.Repeat("a", 129),
	}
	for _, key := range bad {
		t.Run(fmt.Sprintf("%q", key), func(t *testing.T) {
			_, err := d.Create(ctx, key)
			wantClass(t, "Create", err, errdefs.ErrInvalid)
			_, err = d.Snapshot(ctx, "parent", key, false)
			wantClass(t, "Snapshot into it", err, errdefs.ErrInvalid)
			_, err = d.Snapshot(ctx, key, "child", false)
			wantClass(t, "Snapshot from it", err, errdefs.ErrInvalid)
			wantClass(t, "Seal", d.Seal(ctx, key), errdefs.ErrInvalid)
			wantClass(t, "Remove", d.Remove(ctx, key), errdefs.ErrInvalid)
			_, err = d.Stat(ctx, key)
			wantClass(t, "Stat", err, errdefs.ErrInvalid)
			_, err = d.Usage(ctx, key)
			wantClass(t, "Usage", err, errdefs.ErrInvalid)
			if p := d.Path(key); p != "" {
				t.Errorf("Path = %q, want \"\"", p)
			}
		})
	}
	for _, prefix := range []string{"/", "/abs", "../", "a//", "A"} {
		_, err := d.List(ctx, prefix)
		wantClass(t, fmt.Sprintf("List(%q)", prefix), err, errdefs.ErrInvalid)
	}
	// Nothing was made.
	list, err := d.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := keys(list); !slices.Equal(got, []string{"parent"}) {
		t.Errorf("volumes after invalid calls: %v, want [parent]", got)
	}
	if got := poolEntries(t, d); !slices.Equal(got, []string{"parent"}) {
		t.Errorf("pool entries after invalid calls: %v, want [parent]", got)
	}
}

func testUsage(t *testing.T, d storage.Driver) {
	ctx := t.Context()
	p := mustCreate(t, d, "u")
	usage := func() int64 {
		t.Helper()
		n, err := d.Usage(ctx, "u")
		if err != nil {
			t.Fatalf("Usage: %v", err)
		}
		return n
	}
	u0 := usage()
	writeFile(t, p, "big", strings.Repeat("x", 1<<20))
	u1 := usage()
	if u1 < u0+1<<20 {
		t.Errorf("Usage after writing 1 MiB: %d, was %d", u1, u0)
	}
	writeFile(t, p, "dir/more", strings.Repeat("y", 512<<10))
	u2 := usage()
	if u2 < u1+512<<10 {
		t.Errorf("Usage after writing 512 KiB more: %d, was %d", u2, u1)
	}
	// A second name for a file takes no space.
	if err := os.Link(filepath.Join(p, "big"), filepath.Join(p, "big-link")); err != nil {
		t.Fatal(err)
	}
	if u3 := usage(); u3 != u2 {
		t.Errorf("Usage after a hard link: %d, want %d", u3, u2)
	}
	mustSnapshot(t, d, "u", "u-copy", true)
	if n, err := d.Usage(ctx, "u-copy"); err != nil || n != u2 {
		t.Errorf("Usage of a snapshot = %d, %v; want %d", n, err, u2)
	}
	if err := os.Remove(filepath.Join(p, "dir/more")); err != nil {
		t.Fatal(err)
	}
	if u4 := usage(); u4 >= u2 {
		t.Errorf("Usage after deleting 512 KiB: %d, was %d", u4, u2)
	}
}

func testList(t *testing.T, d storage.Driver) {
	ctx := t.Context()
	mustCreate(t, d, "images/a")
	mustCreate(t, d, "images/b")
	mustCreate(t, d, "sandboxes/x")
	mustSnapshot(t, d, "images/a", "sandboxes/y", true)
	mustCreate(t, d, "top")
	mustCreate(t, d, "deep/1/2/3")
	writeFile(t, d.Path("images/a"), "inner/dir/file", "not a volume")

	tests := []struct {
		prefix string
		want   []string
	}{
		{"", []string{"deep/1/2/3", "images/a", "images/b", "sandboxes/x", "sandboxes/y", "top"}},
		{"images/", []string{"images/a", "images/b"}},
		{"images/a", []string{"images/a"}},
		{"images", []string{"images/a", "images/b"}},
		{"i", []string{"images/a", "images/b"}},
		{"sandboxes/", []string{"sandboxes/x", "sandboxes/y"}},
		{"deep/1/2/", []string{"deep/1/2/3"}},
		{"t", []string{"top"}},
		{"images/a/", nil},
		{"nomatch/", nil},
		{"nomatch", nil},
	}
	for _, tt := range tests {
		list, err := d.List(ctx, tt.prefix)
		if err != nil {
			t.Errorf("List(%q): %v", tt.prefix, err)
			continue
		}
		if got := keys(list); !slices.Equal(got, tt.want) && len(got)+len(tt.want) > 0 {
			t.Errorf("List(%q) = %v, want %v", tt.prefix, got, tt.want)
		}
		for _, info := range list {
			if info.Path != d.Path(info.Key) {
				t.Errorf("List(%q): %s has path %q, Path says %q", tt.prefix, info.Key, info.Path, d.Path(info.Key))
			}
			if ro := info.Key == "sandboxes/y"; info.ReadOnly != ro {
				t.Errorf("List(%q): %s has ReadOnly %v, want %v", tt.prefix, info.Key, info.ReadOnly, ro)
			}
		}
	}
}
