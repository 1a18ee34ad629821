package btrfs

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/den-dev/den/internal/storage"
)

// Sandboxes together stop at the pool less its reserve, each under its own
// cap, while den's own volumes and snapshots still take writes; freeing a
// sandbox's files gives the room back.
func TestReserve(t *testing.T) {
	cfg := loopPool(t)
	u, err := storage.StatPool(cfg.Dir)
	if err != nil {
		t.Fatal(err)
	}
	const together = 96 << 20
	cfg.Quotas, cfg.Reserve = QuotasSimple, u.Size-together
	d := openPool(t, cfg)
	ctx := t.Context()
	create(t, d, "images/base")
	if err := d.Seal(ctx, "images/base"); err != nil {
		t.Fatal(err)
	}
	a := snapshot(t, d, "images/base", "sandboxes/a", false)
	b := snapshot(t, d, "images/base", "sandboxes/b", false)
	for _, k := range []string{"sandboxes/a", "sandboxes/b"} {
		if err := d.SetLimit(ctx, k, 64<<20); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := writeSynced(filepath.Join(a, "fill"), 60<<20); err != nil {
		t.Fatalf("writing 60 MiB under a 64 MiB cap: wrote %d, %v", n, err)
	}
	// b's own cap leaves it 64 MiB; the reserve only about 36.
	n, err := writeSynced(filepath.Join(b, "fill"), 60<<20)
	if !errors.Is(err, syscall.EDQUOT) || n > 40<<20 {
		t.Fatalf("writing 60 MiB into b with 36 MiB left to sandboxes: wrote %d MiB, %v; want EDQUOT", n>>20, err)
	}
	q, err := d.SandboxesQuota()
	if err != nil || q.Limit != together || q.Used < 90<<20 {
		t.Errorf("SandboxesQuota = %+v, %v; want about %d MiB used of %d", q, err, 96, together>>20)
	}

	// Den's own volumes are outside the group: an image and a snapshot
	// still take writes.
	img := create(t, d, "images/other")
	if _, err := writeSynced(filepath.Join(img, "blob"), 32<<20); err != nil {
		t.Errorf("writing into an image with sandboxes at their bound: %v", err)
	}
	snapshot(t, d, "sandboxes/b", "checkpoints/b-1", true)

	// Freed room is the sandboxes' again.
	os.Remove(filepath.Join(b, "fill"))
	os.Remove(filepath.Join(a, "fill"))
	if _, err := writeSynced(filepath.Join(b, "again"), 8<<20); err != nil {
		t.Errorf("writing after the others freed theirs: %v", err)
	}

	// Another dend with another reserve resizes the bound.
	cfg.Reserve = u.Size - 200<<20
	d2 := openPool(t, cfg)
	if err := d2.SetLimit(ctx, "sandboxes/a", 64<<20); err != nil {
		t.Fatal(err)
	}
	if q, err := d2.SandboxesQuota(); err != nil || q.Limit != 200<<20 {
		t.Errorf("SandboxesQuota after a new reserve = %+v, %v", q, err)
	}
}
