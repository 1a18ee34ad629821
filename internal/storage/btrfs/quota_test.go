package btrfs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/den-dev/den/internal/storage"
	"github.com/den-dev/den/internal/storage/storagetest"
)

// The btrfs driver passes the conformance suite, its size caps included,
// on a loop-file pool of its own, in each quota mode.
func TestSuite(t *testing.T) {
	for _, mode := range []QuotaMode{QuotasSimple, QuotasFull} {
		t.Run(string(mode), func(t *testing.T) {
			cfg := loopPool(t)
			n := 0
			storagetest.Run(t, func(t *testing.T) storage.Driver {
				n++
				dir := filepath.Join(cfg.Dir, fmt.Sprintf("suite-%d", n))
				d, err := Open(t.Context(), Config{Dir: dir, Quotas: mode}, slog.New(slog.DiscardHandler))
				if err != nil {
					t.Fatal(err)
				}
				return d
			})
			if m, err := openPool(t, cfg).quotaMode(); err != nil || m != mode {
				t.Errorf("the pool's quotas are %q (%v), want %q", m, err, mode)
			}
		})
	}
}

// What counts against a cap, in each mode, through a hibernation: the
// sandbox writes, is checkpointed and removed, and resumes at its key.
func TestQuotaModes(t *testing.T) {
	for _, tt := range []struct {
		mode QuotaMode
		// imageCounts: the image's 24 MiB count against the sandbox's cap.
		imageCounts bool
	}{
		{QuotasFull, true},
		{QuotasSimple, false},
	} {
		t.Run(string(tt.mode), func(t *testing.T) {
			cfg := loopPool(t)
			cfg.Quotas = tt.mode
			d := openPool(t, cfg)
			ctx := t.Context()
			img := create(t, d, "images/base")
			writeBytes(t, filepath.Join(img, "blob"), 24<<20)
			if err := d.Seal(ctx, "images/base"); err != nil {
				t.Fatal(err)
			}
			sb := snapshot(t, d, "images/base", "sandboxes/a", false)
			if err := d.SetLimit(ctx, "sandboxes/a", 16<<20); err != nil {
				t.Fatal(err)
			}
			err := os.WriteFile(filepath.Join(sb, "eight"), make([]byte, 8<<20), 0o644)
			if tt.imageCounts != errors.Is(err, syscall.EDQUOT) {
				t.Fatalf("writing 8 MiB into a sandbox capped at 16 on a 24 MiB image: %v", err)
			}

			// Room for 8 MiB more: write 6, hibernate, resume: the 6
			// still count.
			os.Remove(filepath.Join(sb, "eight"))
			base := int64(0)
			if tt.imageCounts {
				base = 24 << 20
			}
			if err := d.SetLimit(ctx, "sandboxes/a", base+8<<20); err != nil {
				t.Fatal(err)
			}
			writeBytes(t, filepath.Join(sb, "six"), 6<<20)
			snapshot(t, d, "sandboxes/a", "checkpoints/a-1", true)
			if err := d.Remove(ctx, "sandboxes/a"); err != nil {
				t.Fatal(err)
			}
			sb = snapshot(t, d, "checkpoints/a-1", "sandboxes/a", false)
			if q, err := d.Quota(ctx, "sandboxes/a"); err != nil || q.Used < base+6<<20 || q.Limit != base+8<<20 {
				t.Errorf("Quota of the resumed volume = %+v, %v; want %d MiB used of %d", q, err, (base+6<<20)>>20, (base+8<<20)>>20)
			}
			if n, err := writeSynced(filepath.Join(sb, "four"), 4<<20); !errors.Is(err, syscall.EDQUOT) {
				t.Errorf("writing 4 MiB into the resumed volume with 2 left: wrote %d, %v; want EDQUOT", n, err)
			}

			// Deleting what the checkpoint still holds frees room at
			// once in full mode (the volume no longer references it),
			// and in simple mode only once btrfs has dropped the
			// checkpoint (it is still the sandbox's own data, held).
			os.Remove(filepath.Join(sb, "six"))
			os.Remove(filepath.Join(sb, "four"))
			_, err = writeSynced(filepath.Join(sb, "four"), 4<<20)
			if tt.imageCounts != (err == nil) {
				t.Errorf("writing 4 MiB after deleting 6 the checkpoint holds: %v", err)
			}
		})
	}
}

func openPool(t *testing.T, cfg Config) *Driver {
	t.Helper()
	d, err := Open(t.Context(), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func create(t *testing.T, d *Driver, key string) string {
	t.Helper()
	p, err := d.Create(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func snapshot(t *testing.T, d *Driver, parent, key string, readonly bool) string {
	t.Helper()
	p, err := d.Snapshot(t.Context(), parent, key, readonly)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// writeSynced writes n bytes to a new file and syncs it, returning how
// many were written.
func writeSynced(path string, n int) (int, error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	w, err := f.Write(make([]byte, n))
	if err == nil {
		err = f.Sync()
	}
	return w, err
}

func writeBytes(t *testing.T, path string, n int) {
	t.Helper()
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i * 7)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// loopPool mounts a btrfs pool in a new loop file for the test, and
// unmounts it, checking its loop device is gone, when the test ends. It
// skips under -short, when not root, or without mkfs.btrfs.
func loopPool(t *testing.T) Config { return loopPoolB(t) }

func loopPoolB(t testing.TB) Config {
	t.Helper()
	if testing.Short() {
		t.Skip("mounts a loop device")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a loop device")
	}
	if _, err := exec.LookPath("mkfs.btrfs"); err != nil {
		t.Skip("needs mkfs.btrfs (btrfs-progs)")
	}
	base := t.TempDir()
	cfg := Config{Dir: filepath.Join(base, "pool"), LoopFile: filepath.Join(base, "pool.img"), LoopSize: 1 << 30}
	t.Cleanup(func() { unmountPool(t, cfg) })
	if _, err := Open(context.Background(), cfg, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatalf("opening a loop pool: %v", err)
	}
	return cfg
}

func unmountPool(t testing.TB, cfg Config) {
	for {
		ok, err := IsBtrfs(cfg.Dir)
		if err != nil || !ok {
			break
		}
		if err := unix.Unmount(cfg.Dir, 0); err != nil {
			t.Errorf("unmounting the pool: %v", err)
			if err := unix.Unmount(cfg.Dir, unix.MNT_DETACH); err != nil {
				t.Errorf("detaching the pool: %v", err)
				return
			}
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		devs, err := LoopDevices(cfg.LoopFile)
		if err != nil {
			t.Error(err)
			return
		}
		if len(devs) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("loop devices %v still attached after unmount", devs)
			return
		}
		time.Sleep(10 * time.Millisecond) // polling a condition with a deadline
	}
}

// BenchmarkSnapshotQuotas measures, on a 20,000-file image, a sandbox's
// snapshot, the sync a checkpoint makes after the sandbox rewrote 1,000
// files, the checkpoint's snapshot, and removing both, without quotas and
// in each quota mode (with a cap on the sandbox).
func BenchmarkSnapshotQuotas(b *testing.B) {
	for _, mode := range []QuotaMode{"", QuotasSimple, QuotasFull} {
		quotas := mode != ""
		name := string(mode)
		if !quotas {
			name = "none"
		}
		b.Run(name, func(b *testing.B) {
			cfg := loopPoolB(b)
			cfg.Quotas = mode
			ctx := b.Context()
			d, err := Open(ctx, cfg, slog.New(slog.DiscardHandler))
			if err != nil {
				b.Fatal(err)
			}
			img, err := d.Create(ctx, "images/base")
			if err != nil {
				b.Fatal(err)
			}
			for i := range 20000 {
				sub := filepath.Join(img, fmt.Sprintf("d%03d", i/100))
				if i%100 == 0 {
					if err := os.Mkdir(sub, 0o755); err != nil {
						b.Fatal(err)
					}
				}
				if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("f%05d", i)), make([]byte, 100+i%4000), 0o644); err != nil {
					b.Fatal(err)
				}
			}
			if err := d.Seal(ctx, "images/base"); err != nil {
				b.Fatal(err)
			}
			var snap, syncd, ckpt, rm time.Duration
			for i := 0; i < b.N; i++ {
				key := fmt.Sprintf("sandboxes/s%d", i)
				start := time.Now()
				p, err := d.Snapshot(ctx, "images/base", key, false)
				if err != nil {
					b.Fatal(err)
				}
				snap += time.Since(start)
				if quotas {
					if err := d.SetLimit(ctx, key, 1<<30); err != nil {
						b.Fatal(err)
					}
				}
				for j := 0; j < 20000; j += 20 {
					name := filepath.Join(p, fmt.Sprintf("d%03d", j/100), fmt.Sprintf("f%05d", j))
					if err := os.WriteFile(name, []byte("changed"), 0o644); err != nil {
						b.Fatal(err)
					}
				}
				start = time.Now()
				if f, err := os.Open(p); err == nil {
					unix.Syncfs(int(f.Fd()))
					f.Close()
				}
				syncd += time.Since(start)
				start = time.Now()
				if f, err := os.Open(p); err == nil {
					unix.Syncfs(int(f.Fd()))
					f.Close()
				}
				syncd += time.Since(start)
				start = time.Now()
				if _, err := d.Snapshot(ctx, key, key+"-ckpt", true); err != nil {
					b.Fatal(err)
				}
				ckpt += time.Since(start)
				start = time.Now()
				if err := d.Remove(ctx, key); err != nil {
					b.Fatal(err)
				}
				if err := d.Remove(ctx, key+"-ckpt"); err != nil {
					b.Fatal(err)
				}
				rm += time.Since(start)
			}
			b.ReportMetric(float64(snap.Microseconds())/1000/float64(b.N), "ms/snapshot")
			b.ReportMetric(float64(ckpt.Microseconds())/1000/float64(b.N), "ms/checkpoint")
			b.ReportMetric(float64(syncd.Microseconds())/1000/float64(b.N), "ms/sync")
			b.ReportMetric(float64(rm.Microseconds())/1000/float64(b.N), "ms/remove-both")
			b.ReportMetric(float64(syncd.Microseconds())/1000/float64(b.N), "ms/sync")
		})
	}
}

// A volume's count lags what it wrote until btrfs commits; Recount
// brings it up to date at once, in each mode.
func TestRecount(t *testing.T) {
	for _, mode := range []QuotaMode{QuotasSimple, QuotasFull} {
		t.Run(string(mode), func(t *testing.T) {
			cfg := loopPool(t)
			cfg.Quotas = mode
			d := openPool(t, cfg)
			ctx := t.Context()
			img := create(t, d, "images/base")
			writeBytes(t, filepath.Join(img, "blob"), 1<<20)
			if err := d.Seal(ctx, "images/base"); err != nil {
				t.Fatal(err)
			}
			sb := snapshot(t, d, "images/base", "sandboxes/a", false)
			if err := d.SetLimit(ctx, "sandboxes/a", 64<<20); err != nil {
				t.Fatal(err)
			}
			if err := d.Recount(ctx); err != nil {
				t.Fatal(err)
			}
			before, err := d.Quota(ctx, "sandboxes/a")
			if err != nil {
				t.Fatal(err)
			}
			// Written, not synced: only a commit counts it.
			if err := os.WriteFile(filepath.Join(sb, "new"), make([]byte, 4<<20), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := d.Recount(ctx); err != nil {
				t.Fatal(err)
			}
			after, err := d.Quota(ctx, "sandboxes/a")
			if err != nil || after.Used < before.Used+4<<20 {
				t.Errorf("after writing 4 MiB and a recount: %+v (%v), before %+v", after, err, before)
			}
		})
	}
}
