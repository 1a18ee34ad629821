package storagetest

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/storage"
)

// testMove sends volumes away and receives them back, whole and as diffs,
// after removing every local copy: what a host that lost its disk does
// with what the blob store kept.
func testMove(t *testing.T, d storage.Driver) {
	m, ok := d.(storage.Mover)
	if !ok {
		t.Skip("the driver cannot send volumes")
	}
	ctx := t.Context()
	base := mustCreate(t, d, "images/base")
	writeFile(t, base, "etc/hostname", "den\n")
	writeFile(t, base, "big", strings.Repeat("0123456789abcdef", 1<<16))
	writeFile(t, base, "gone", "soon")
	if err := os.Symlink("etc/hostname", filepath.Join(base, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(base, "etc"), 0o710); err != nil {
		t.Fatal(err)
	}
	if err := d.Seal(ctx, "images/base"); err != nil {
		t.Fatal(err)
	}
	live := mustSnapshot(t, d, "images/base", "sandboxes/s", false)
	writeFile(t, live, "etc/hostname", "changed\n")
	writeFile(t, live, "new", "1")
	if err := os.Remove(filepath.Join(live, "gone")); err != nil {
		t.Fatal(err)
	}
	mustSnapshot(t, d, "sandboxes/s", "checkpoints/c1", true)

	send := func(key, against string) ([]byte, bool) {
		t.Helper()
		var buf bytes.Buffer
		diff, err := m.Send(ctx, key, against, &buf)
		if err != nil {
			t.Fatalf("Send(%q, %q): %v", key, against, err)
		}
		return buf.Bytes(), diff
	}
	receive := func(key string, stream []byte) string {
		t.Helper()
		if err := m.Receive(ctx, key, bytes.NewReader(stream)); err != nil {
			t.Fatalf("Receive(%q): %v", key, err)
		}
		info := mustStat(t, d, key)
		if !info.ReadOnly {
			t.Fatalf("received volume %q is writable", key)
		}
		return info.Path
	}
	full, _ := send("images/base", "")
	s1, diff := send("checkpoints/c1", "images/base")
	t.Logf("%s: base %d bytes; c1 against it %d bytes (diff %v)", m.StreamFormat(), len(full), len(s1), diff)
	if diff && len(s1) >= len(full)/4 {
		t.Errorf("a diff of a few bytes is %d bytes, the whole base %d", len(s1), len(full))
	}

	// Back from the diff while the base is here.
	mustRemove(t, d, "checkpoints/c1")
	c1 := receive("checkpoints/c1", s1)
	wantC1 := func(p string) {
		t.Helper()
		wantFile(t, p, "etc/hostname", "changed\n")
		wantFile(t, p, "new", "1")
		wantAbsent(t, p, "gone")
		wantFile(t, p, "big", strings.Repeat("0123456789abcdef", 1<<16))
		if target, err := os.Readlink(filepath.Join(p, "link")); err != nil || target != "etc/hostname" {
			t.Errorf("link = %q, %v", target, err)
		}
		if fi, err := os.Stat(filepath.Join(p, "etc")); err != nil || fi.Mode().Perm() != 0o710 {
			t.Errorf("etc mode = %v, %v; want 0710", fi.Mode().Perm(), err)
		}
	}
	wantC1(c1)

	// A received volume serves as a sandbox's files and as the base of
	// the next diff.
	mustRemove(t, d, "sandboxes/s")
	live = mustSnapshot(t, d, "checkpoints/c1", "sandboxes/s", false)
	writeFile(t, live, "new", "2")
	mustSnapshot(t, d, "sandboxes/s", "checkpoints/c2", true)
	s2, _ := send("checkpoints/c2", "checkpoints/c1")

	// A host with nothing: the whole chain, in order.
	for _, k := range []string{"sandboxes/s", "checkpoints/c2", "checkpoints/c1", "images/base"} {
		mustRemove(t, d, k)
	}
	receive("images/base", full)
	wantC1(receive("checkpoints/c1", s1))
	c2 := receive("checkpoints/c2", s2)
	wantFile(t, c2, "new", "2")
	wantFile(t, c2, "etc/hostname", "changed\n")

	// Refusals leave nothing behind.
	err := m.Receive(ctx, "checkpoints/c2", bytes.NewReader(s2))
	wantClass(t, "Receive onto an existing key", err, errdefs.ErrConflict)
	if err := m.Receive(ctx, "checkpoints/bad", strings.NewReader("not a stream")); err == nil {
		t.Errorf("Receive of garbage succeeded")
	}
	if err := m.Receive(ctx, "checkpoints/cut", bytes.NewReader(full[:len(full)/2])); err == nil {
		t.Errorf("Receive of half a stream succeeded")
	}
	for _, k := range []string{"checkpoints/bad", "checkpoints/cut"} {
		if _, err := d.Stat(ctx, k); !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("a failed Receive left %q: %v", k, err)
		}
	}
	_, err = m.Send(ctx, "sandboxes/none", "", &bytes.Buffer{})
	wantClass(t, "Send of a missing volume", err, errdefs.ErrNotFound)
	mustSnapshot(t, d, "images/base", "sandboxes/w", false)
	_, err = m.Send(ctx, "sandboxes/w", "", &bytes.Buffer{})
	wantClass(t, "Send of a writable volume", err, errdefs.ErrInvalid)
	if list, _ := d.List(ctx, ""); len(list) != 4 {
		t.Errorf("volumes after the refusals: %v", keys(list))
	}
}
