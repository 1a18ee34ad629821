package integration

import (
	"bufio"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/den-dev/den/internal/storage"
	"github.com/den-dev/den/internal/storage/btrfs"
	copydriver "github.com/den-dev/den/internal/storage/copy"
	"github.com/den-dev/den/internal/storage/storagetest"
)

// The btrfs driver passes the conformance suite on a loop-file pool made
// for this run; every subtest gets a directory of its own in it.
func TestStorageBtrfs(t *testing.T) {
	cfg := newLoopPool(t)
	n := 0
	storagetest.Run(t, func(t *testing.T) storage.Driver {
		n++
		d, err := btrfs.Open(t.Context(), btrfs.Config{Dir: filepath.Join(cfg.Dir, fmt.Sprintf("suite-%d", n))}, quietLog())
		if err != nil {
			t.Fatal(err)
		}
		return d
	})
}

// Opening a pool that is already mounted uses that mount: no second mount,
// no second loop device.
func TestStorageBtrfsOpenIdempotent(t *testing.T) {
	cfg := newLoopPool(t)
	d, err := btrfs.Open(t.Context(), cfg, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	p, err := d.Create(t.Context(), "images/kept")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p, "file"), []byte("still here"), 0o644); err != nil {
		t.Fatal(err)
	}

	for range 2 {
		d, err = btrfs.Open(t.Context(), cfg, quietLog())
		if err != nil {
			t.Fatalf("opening the pool again: %v", err)
		}
	}
	if n := mountsAt(t, cfg.Dir); n != 1 {
		t.Errorf("%d mounts at the pool after three Opens, want 1", n)
	}
	if devs := loopDevices(t, cfg.LoopFile); len(devs) != 1 {
		t.Errorf("loop devices for the pool after three Opens: %v, want one", devs)
	}
	if _, err := d.Stat(t.Context(), "images/kept"); err != nil {
		t.Errorf("the volume made before is gone: %v", err)
	}
}

// After a reboot the loop file is there but nothing is mounted: Open mounts
// it again, and every volume is as it was, read-only ones still read-only.
func TestStorageBtrfsRemountAfterReboot(t *testing.T) {
	cfg := newLoopPool(t)
	ctx := t.Context()
	d, err := btrfs.Open(ctx, cfg, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	p, err := d.Create(ctx, "sandboxes/sb")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p, "note"), []byte("written before the reboot"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Snapshot(ctx, "sandboxes/sb", "checkpoints/sb-1", true); err != nil {
		t.Fatal(err)
	}

	unmountLoopPool(t, cfg) // the reboot
	if ok, err := btrfs.IsBtrfs(cfg.Dir); err != nil || ok {
		t.Fatalf("after unmounting, IsBtrfs = %v, %v; want false", ok, err)
	}

	d, err = btrfs.Open(ctx, cfg, quietLog())
	if err != nil {
		t.Fatalf("opening the pool after a reboot: %v", err)
	}
	if n := mountsAt(t, cfg.Dir); n != 1 {
		t.Errorf("%d mounts at the pool, want 1", n)
	}
	list, err := d.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	want := []storage.Info{
		{Key: "checkpoints/sb-1", Path: d.Path("checkpoints/sb-1"), ReadOnly: true},
		{Key: "sandboxes/sb", Path: d.Path("sandboxes/sb")},
	}
	if fmt.Sprint(list) != fmt.Sprint(want) {
		t.Errorf("volumes after the reboot: %+v, want %+v", list, want)
	}
	for _, key := range []string{"sandboxes/sb", "checkpoints/sb-1"} {
		b, err := os.ReadFile(filepath.Join(d.Path(key), "note"))
		if err != nil || string(b) != "written before the reboot" {
			t.Errorf("%s/note after the reboot: %q, %v", key, b, err)
		}
	}
}

// A volume that holds subvolumes of its own (made by hand, or by a tool in
// an image build) is removed whole, read-only or not.
func TestStorageBtrfsRemoveNestedSubvolumes(t *testing.T) {
	cfg := newLoopPool(t)
	if _, err := exec.LookPath("btrfs"); err != nil {
		t.Skip("needs the btrfs program to make nested subvolumes")
	}
	ctx := t.Context()
	d, err := btrfs.Open(ctx, cfg, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"images/rw", "images/ro"} {
		p, err := d.Create(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		for _, sub := range []string{"var", "var/lib", "var/lib/inner"} {
			if out, err := exec.Command("btrfs", "-q", "subvolume", "create", filepath.Join(p, sub)).CombinedOutput(); err != nil {
				t.Fatalf("making a nested subvolume: %v: %s", err, out)
			}
		}
		if err := os.WriteFile(filepath.Join(p, "var/lib/inner/file"), []byte("x"), 0o444); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Seal(ctx, "images/ro"); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"images/rw", "images/ro"} {
		if err := d.Remove(ctx, key); err != nil {
			t.Errorf("Remove(%q): %v", key, err)
		}
		if _, err := os.Lstat(d.Path(key)); !os.IsNotExist(err) {
			t.Errorf("%s is still there after Remove (%v)", key, err)
		}
	}
}

// BenchmarkSnapshot measures a snapshot of a volume of 20,000 small files.
func BenchmarkSnapshot(b *testing.B) {
	cfg := newLoopPool(b)
	ctx := b.Context()
	bt, err := btrfs.Open(ctx, cfg, quietLog())
	if err != nil {
		b.Fatal(err)
	}
	cp, err := copydriver.Open(filepath.Join(b.TempDir(), "copy-pool"), quietLog())
	if err != nil {
		b.Fatal(err)
	}
	for _, d := range []storage.Driver{bt, cp} {
		p, err := d.Create(ctx, "images/base")
		if err != nil {
			b.Fatal(err)
		}
		fillVolume(b, p, 20000)
		if err := d.Seal(ctx, "images/base"); err != nil {
			b.Fatal(err)
		}
		if _, err := d.Snapshot(ctx, "images/base", "sandboxes/live", false); err != nil {
			b.Fatal(err)
		}
	}
	cases := []struct {
		name            string
		d               storage.Driver
		parent          string
		readonly, dirty bool
	}{
		{"btrfs/image-to-sandbox", bt, "images/base", false, false},
		{"btrfs/checkpoint", bt, "sandboxes/live", true, false},
		{"btrfs/checkpoint-after-1mib-write", bt, "sandboxes/live", true, true},
		{"copy/image-to-sandbox", cp, "images/base", false, false},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				key := fmt.Sprintf("bench/%s-%d", strings.ReplaceAll(c.name, "/", "-"), i)
				if c.dirty {
					b.StopTimer()
					data := make([]byte, 1<<20)
					data[0] = byte(i)
					if err := os.WriteFile(filepath.Join(c.d.Path(c.parent), "dirty"), data, 0o644); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
				if _, err := c.d.Snapshot(ctx, c.parent, key, c.readonly); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if err := c.d.Remove(ctx, key); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/snapshot")
		})
	}
}

// fillVolume writes n small files into dir, 100 to a directory.
func fillVolume(tb testing.TB, dir string, n int) {
	tb.Helper()
	for i := range n {
		sub := filepath.Join(dir, fmt.Sprintf("d%03d", i/100))
		if i%100 == 0 {
			if err := os.Mkdir(sub, 0o755); err != nil {
				tb.Fatal(err)
			}
		}
		body := strings.Repeat(fmt.Sprintf("file %d\n", i), 1+i%100)
		if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("f%05d", i)), []byte(body), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
}

func quietLog() *slog.Logger { return slog.New(slog.DiscardHandler) }

// newLoopPool opens a btrfs pool in a new loop file, and unmounts it and
// checks that its loop device is gone when the test ends. It skips when
// not root or without mkfs.btrfs.
func newLoopPool(tb testing.TB) btrfs.Config {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Skip("needs root to mount a loop device")
	}
	if _, err := exec.LookPath("mkfs.btrfs"); err != nil {
		tb.Skip("needs mkfs.btrfs (btrfs-progs)")
	}
	base := tb.TempDir()
	cfg := btrfs.Config{
		Dir:      filepath.Join(base, "pool"),
		LoopFile: filepath.Join(base, "pool.img"),
		LoopSize: 2 << 30,
	}
	tb.Cleanup(func() { unmountLoopPool(tb, cfg) })
	if _, err := btrfs.Open(tb.Context(), cfg, quietLog()); err != nil {
		tb.Fatalf("opening a loop pool: %v", err)
	}
	if n := mountsAt(tb, cfg.Dir); n != 1 {
		tb.Fatalf("%d mounts at the new pool, want 1", n)
	}
	return cfg
}

// unmountLoopPool unmounts the pool and waits for its loop device to
// detach itself; one that does not is detached and reported.
func unmountLoopPool(tb testing.TB, cfg btrfs.Config) {
	tb.Helper()
	for mountsAt(tb, cfg.Dir) > 0 {
		if err := unix.Unmount(cfg.Dir, 0); err != nil {
			tb.Errorf("unmounting the pool: %v", err)
			if err := unix.Unmount(cfg.Dir, unix.MNT_DETACH); err != nil {
				tb.Errorf("detaching the pool's mount: %v", err)
				return
			}
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(loopDevices(tb, cfg.LoopFile)) > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // polling a condition with a deadline
	}
	for _, dev := range loopDevices(tb, cfg.LoopFile) {
		tb.Errorf("loop device %s still attached after unmount; detaching it", dev)
		if f, err := os.Open(dev); err == nil {
			unix.IoctlSetInt(int(f.Fd()), unix.LOOP_CLR_FD, 0)
			f.Close()
		}
	}
}

// mountsAt counts the mounts whose mount point is dir.
func mountsAt(tb testing.TB, dir string) int {
	tb.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	n := 0
	s := bufio.NewScanner(f)
	for s.Scan() {
		if fields := strings.Fields(s.Text()); len(fields) > 4 && fields[4] == dir {
			n++
		}
	}
	return n
}

func loopDevices(tb testing.TB, file string) []string {
	tb.Helper()
	devs, err := btrfs.LoopDevices(file)
	if err != nil {
		tb.Fatal(err)
	}
	return devs
}
