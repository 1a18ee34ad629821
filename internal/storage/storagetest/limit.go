package storagetest

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/sandbox"
	"github.com/den-dev/den/internal/storage"
)

// testLimit: a capped volume takes writes up to its limit and refuses the
// rest inside the volume only; a driver that cannot enforce a limit refuses
// to set one.
func testLimit(t *testing.T, d storage.Driver) {
	ctx := t.Context()
	const limit = 16 << 20
	p := mustCreate(t, d, "sandboxes/capped")
	writeFile(t, p, "etc/hostname", "den\n")

	wantClass(t, "SetLimit on a missing volume", d.SetLimit(ctx, "sandboxes/none", limit), errdefs.ErrNotFound)
	wantClass(t, "SetLimit with a negative size", d.SetLimit(ctx, "sandboxes/capped", -1), errdefs.ErrInvalid)
	wantClass(t, "SetLimit on an invalid key", d.SetLimit(ctx, "../x", limit), errdefs.ErrInvalid)
	_, err := d.Quota(ctx, "sandboxes/none")
	wantClass(t, "Quota of a missing volume", err, errdefs.ErrNotFound)

	err = d.SetLimit(ctx, "sandboxes/capped", limit)
	if errors.Is(err, errdefs.ErrUnavailable) {
		// It says so rather than pretend, and how to get one.
		if errdefs.Hint(err) == "" {
			t.Errorf("refusing a limit: %v, with no hint", err)
		}
		if q := mustQuota(t, d, "sandboxes/capped"); q.Limit != 0 || q.Used < 4 {
			t.Errorf("Quota of an uncapped volume holding 4 bytes = %+v", q)
		}
		if err := d.SetLimit(ctx, "sandboxes/capped", 0); err != nil {
			t.Errorf("lifting a limit that cannot be set: %v", err)
		}
		return
	}
	if err != nil {
		t.Fatalf("SetLimit: %v", err)
	}
	if q := mustQuota(t, d, "sandboxes/capped"); q.Limit != limit || q.Used < 0 || q.Used > limit {
		t.Errorf("Quota of a capped volume = %+v, want the cap %d and use below it", q, limit)
	}

	// Past the limit, writes fail in the volume...
	n, err := fill(filepath.Join(p, "big"), 2*limit)
	if !isFull(err) {
		t.Fatalf("writing %d bytes into a volume capped at %d: wrote %d, error %v; want EDQUOT or ENOSPC", 2*limit, limit, n, err)
	}
	if n > limit {
		t.Errorf("wrote %d bytes into a volume capped at %d", n, limit)
	}
	// ...and nowhere else: the pool still takes more than the limit.
	free := mustCreate(t, d, "sandboxes/free")
	if n, err := fill(filepath.Join(free, "big"), 2*limit); err != nil {
		t.Fatalf("writing into an uncapped volume beside a full one: %d bytes, %v", n, err)
	}

	// Removing files makes room again.
	if err := os.Remove(filepath.Join(p, "big")); err != nil {
		t.Fatal(err)
	}
	if _, err := fill(filepath.Join(p, "small"), 1<<20); err != nil {
		t.Errorf("writing 1 MiB after freeing the volume: %v", err)
	}

	// The cap stays with the key: a sandbox hibernated (checkpoint, then
	// its volume removed) and resumed (a new volume at the key) is under
	// it, and what it wrote before still counts.
	mustSnapshot(t, d, "sandboxes/capped", "checkpoints/c", true)
	mustRemove(t, d, "sandboxes/capped")
	p = mustSnapshot(t, d, "checkpoints/c", "sandboxes/capped", false)
	if q := mustQuota(t, d, "sandboxes/capped"); q.Limit != limit {
		t.Errorf("Quota of the resumed volume = %+v, want the cap %d", q, limit)
	}
	if n, err := fill(filepath.Join(p, "big"), limit); !isFull(err) || n > limit-1<<20 {
		t.Errorf("writing %d bytes into the resumed volume, which holds 1 MiB: wrote %d, error %v; want EDQUOT or ENOSPC before %d",
			limit, n, err, limit-1<<20)
	}

	// Lifting the cap lets the volume grow past it.
	if err := d.SetLimit(ctx, "sandboxes/capped", 0); err != nil {
		t.Fatalf("lifting the limit: %v", err)
	}
	if q := mustQuota(t, d, "sandboxes/capped"); q.Limit != 0 {
		t.Errorf("Quota after lifting the limit = %+v", q)
	}
	if n, err := fill(filepath.Join(p, "big"), 2*limit); err != nil {
		t.Errorf("writing past a lifted limit: %d bytes, %v", n, err)
	}
}

func mustQuota(t *testing.T, d storage.Driver, key string) storage.Quota {
	t.Helper()
	q, err := d.Quota(t.Context(), key)
	if err != nil {
		t.Fatalf("Quota(%q): %v", key, err)
	}
	return q
}

// fill writes up to n bytes to a new file at path, syncing it, and
// returns how many were written.
func fill(path string, n int64) (int64, error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(i) // not zeros, in case the filesystem compresses
	}
	written, err := io.CopyN(f, &repeat{buf: buf}, n)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return written, err
}

// repeat reads buf over and over.
type repeat struct{ buf []byte }

func (r *repeat) Read(p []byte) (int, error) { return copy(p, r.buf), nil }

func isFull(err error) bool {
	return errors.Is(err, syscall.EDQUOT) || errors.Is(err, syscall.ENOSPC)
}

// testPoolUsage: a driver that reports how full its pool is gives numbers
// that add up, and says truly whether it enforces caps. (Free space is not
// checked against writes: btrfs shows them only once it commits, and the
// copy driver's filesystem is shared with the host.)
func testPoolUsage(t *testing.T, d storage.Driver) {
	ps, ok := d.(sandbox.PoolStater)
	if !ok {
		t.Skip("the driver does not report its pool's usage")
	}
	ctx := t.Context()
	u, err := ps.PoolUsage(ctx)
	if err != nil {
		t.Fatalf("PoolUsage: %v", err)
	}
	if u.Size <= 0 || u.Used < 0 || u.Free < 0 || u.Used > u.Size || u.Free > u.Size {
		t.Fatalf("PoolUsage = %+v: the numbers do not add up", u)
	}
	mustCreate(t, d, "sandboxes/usage")
	err = d.SetLimit(ctx, "sandboxes/usage", 64<<20)
	if enforced := err == nil; enforced != u.Caps {
		t.Errorf("PoolUsage says caps enforced: %v; SetLimit says %v", u.Caps, err)
	}
}
