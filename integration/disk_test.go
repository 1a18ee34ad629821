package integration

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

// Every sandbox gets a disk cap without asking: one writing zeros stops at
// it with the quota error inside, and its neighbour keeps writing. Health
// reports the pool, its reserve and what the caps promise.
func TestDiskDefaultCap(t *testing.T) {
	d := startDend(t, "--pool-size", "2G")
	ctx := ctxT(t, 5*time.Minute)
	h, err := d.c.Health(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p := h.Pool
	if p == nil || !p.DiskCaps || p.SizeBytes < 1<<30 || p.FreeBytes <= 0 || p.ReserveBytes != p.SizeBytes/10 || p.Full {
		t.Fatalf("health's pool: %+v", p)
	}
	// auto: a quarter of a 2G pool.
	if want := p.SizeBytes / 4; p.DefaultDiskBytes != want {
		t.Fatalf("default disk %d, want a quarter of the pool, %d", p.DefaultDiskBytes, want)
	}
	hog := d.create("hog")
	d.create("neighbour")
	if hog.DiskBytes != p.DefaultDiskBytes {
		t.Fatalf("a sandbox created without --disk has cap %d, want the default %d", hog.DiskBytes, p.DefaultDiskBytes)
	}
	out, errs, code := d.sh("hog", "dd if=/dev/zero of=/root/zeros bs=1M count=900 2>&1; echo exit $?; sync")
	if !strings.Contains(out+errs, "quota") || strings.Contains(out, "exit 0") || code != 0 {
		t.Fatalf("writing 900M of zeros under a default cap of %d: exit %d %q %q", p.DefaultDiskBytes, code, out, errs)
	}
	// btrfs may account a few blocks past the limit (the write that hit
	// it), never megabytes.
	if sb := d.inspect("hog"); sb.Usage == nil || sb.Usage.DiskBytes > p.DefaultDiskBytes+1<<20 {
		t.Fatalf("the hog's usage past its cap: %+v", sb.Usage)
	}
	d.mustSh("neighbour", "dd if=/dev/zero of=/root/zeros bs=1M count=64 && sync")
	if h, err = d.c.Health(ctx); err != nil || h.Pool.PromisedBytes != 2*p.DefaultDiskBytes {
		t.Fatalf("health after two default sandboxes: %v %+v", err, h.Pool)
	}
	// The hog frees its files and writes again.
	d.mustSh("hog", "rm /root/zeros && dd if=/dev/zero of=/root/small bs=1M count=8")
}

// A create or fork whose caps the pool cannot honour beyond the
// overcommit is refused with the numbers, and leaves nothing behind;
// lowering another cap makes room. Sizes no pool could take are 400s.
func TestDiskAdmission(t *testing.T) {
	d := startDend(t, "--pool-size", "2G", "--disk-overcommit", "1")
	ctx := ctxT(t, 5*time.Minute)
	d.create("big", func(r *api.CreateSandboxRequest) { r.Disk = "1600M" })

	before := leftovers(t, d)
	_, err := d.c.CreateSandbox(ctx, api.CreateSandboxRequest{Name: "more", Image: "busybox", Memory: "256M"})
	wantRefused(t, "a create past the overcommit", err, client.ErrUnavailable, "promise", "--disk-overcommit")
	_, err = d.c.Fork(ctx, "big", client.ForkOptions{Name: "kid", Count: 2})
	wantRefused(t, "a fork of 2 past the overcommit", err, client.ErrUnavailable, "promise", "--disk-overcommit")
	if after := leftovers(t, d); after != before {
		t.Fatalf("refusals left something behind:\nbefore %s\nafter  %s", before, after)
	}
	if cks, err := d.c.Checkpoints(ctx, "big"); err != nil || len(cks) != 0 {
		t.Fatalf("a refused fork captured its parent: %v %v", cks, err)
	}

	// Lowering a cap makes room; raising it again past the bound is
	// refused; lifting it is not allowed at all.
	zero := "0"
	_, err = d.c.SetLimits(ctx, "big", api.LimitsRequest{Disk: &zero})
	wantRefused(t, "lifting a cap", err, client.ErrInvalid, "cap", "--disk")
	smaller := "1G"
	if _, err := d.c.SetLimits(ctx, "big", api.LimitsRequest{Disk: &smaller}); err != nil {
		t.Fatal(err)
	}
	d.create("more")
	bigger := "1700M"
	_, err = d.c.SetLimits(ctx, "big", api.LimitsRequest{Disk: &bigger})
	wantRefused(t, "raising a cap past the overcommit", err, client.ErrUnavailable, "promise", "")
	if sb := d.inspect("big"); sb.DiskBytes != 1<<30 {
		t.Fatalf("cap after a refused raise: %d", sb.DiskBytes)
	}

	// Bad sizes.
	for _, disk := range []string{"100G", "lots", "1M", "-5G"} {
		_, err := d.c.CreateSandbox(ctx, api.CreateSandboxRequest{Name: "bad", Image: "busybox", Disk: disk})
		wantRefused(t, "--disk "+disk, err, client.ErrInvalid, "", "")
	}
	if _, err := d.c.GetSandbox(ctx, "bad"); !client.IsNotFound(err) {
		t.Fatalf("a refused create left a record: %v", err)
	}
}

// When the pool's free space falls below the reserve, creates, forks and
// checkpoints are refused with what to free, nothing half-made; a sandbox
// still hibernates and wakes; once space is freed, everything works again.
func TestDiskPoolFull(t *testing.T) {
	d := startDend(t, "--pool-size", "2G")
	ctx := ctxT(t, 5*time.Minute)
	d.create("old")
	d.mustSh("old", "echo kept > /root/kept")

	// Something other than a sandbox fills the pool's filesystem.
	h, err := d.c.Health(ctx)
	if err != nil {
		t.Fatal(err)
	}
	filler := filepath.Join(d.dataDir, "pool", "filler")
	fill(t, filler, h.Pool.FreeBytes-h.Pool.ReserveBytes/4)
	waitFor(t, time.Minute, "health to say the pool is full", func() bool {
		h, err := d.c.Health(ctx)
		return err == nil && h.Pool.Full
	})

	before := leftovers(t, d)
	_, err = d.c.CreateSandbox(ctx, api.CreateSandboxRequest{Name: "new", Image: "busybox", Memory: "256M"})
	wantRefused(t, "a create on a full pool", err, client.ErrUnavailable, "pool is full", "den rm")
	_, err = d.c.Fork(ctx, "old", client.ForkOptions{Name: "kid"})
	wantRefused(t, "a fork on a full pool", err, client.ErrUnavailable, "pool is full", "den rm")
	_, err = d.c.Checkpoint(ctx, "old", client.CheckpointOptions{})
	wantRefused(t, "a checkpoint on a full pool", err, client.ErrUnavailable, "pool is full", "den checkpoint rm")
	if after := leftovers(t, d); after != before {
		t.Fatalf("refusals left something behind:\nbefore %s\nafter  %s", before, after)
	}
	if sb := d.inspect("old"); sb.State != api.StateRunning {
		t.Fatalf("after refusals the sandbox is %s", sb.State)
	}

	// Den's own snapshots still work: it hibernates and wakes.
	if _, err := d.c.Hibernate(ctx, "old"); err != nil {
		t.Fatalf("hibernating on a full pool: %v", err)
	}
	if got := d.mustSh("old", "cat /root/kept"); got != "kept\n" {
		t.Fatalf("after waking: %q", got)
	}

	// Freed: everything works again.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "health to say the pool has room", func() bool {
		syncPool(t, d)
		h, err := d.c.Health(ctx)
		return err == nil && !h.Pool.Full
	})
	d.create("new")
	if _, err := d.c.Fork(ctx, "old", client.ForkOptions{Name: "kid"}); err != nil {
		t.Fatalf("forking once space is freed: %v", err)
	}
	if _, err := d.c.Checkpoint(ctx, "old", client.CheckpointOptions{}); err != nil {
		t.Fatalf("checkpointing once space is freed: %v", err)
	}
}

// fill allocates n bytes in a new file and syncs the filesystem, so its
// free space shows it.
func fill(t *testing.T, path string, n int64) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Fallocate(int(f.Fd()), 0, 0, n); err != nil {
		t.Fatalf("allocating %d bytes: %v", n, err)
	}
	if err := unix.Syncfs(int(f.Fd())); err != nil {
		t.Fatal(err)
	}
}

// syncPool commits the pool's filesystem: btrfs frees what was deleted,
// and shows it in its free space, only once it commits (every 30 s unless
// asked).
func syncPool(t *testing.T, d *dend) {
	f, err := os.Open(filepath.Join(d.dataDir, "pool"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	unix.Syncfs(int(f.Fd()))
}

// wantRefused checks err is of class, its message holds msg and its hint
// hint (either may be "").
func wantRefused(t *testing.T, what string, err error, class error, msg, hint string) {
	t.Helper()
	var ce *client.Error
	if !errors.As(err, &ce) || !errors.Is(err, class) {
		t.Fatalf("%s: %v, want a %v error", what, err, class)
	}
	if !strings.Contains(ce.Message(), msg) || !strings.Contains(ce.Hint(), hint) {
		t.Fatalf("%s: %q (hint %q), want %q with hint %q", what, ce.Message(), ce.Hint(), msg, hint)
	}
	t.Logf("%s: %s (hint: %s)", what, ce.Message(), ce.Hint())
}

// leftovers describes what this dend holds: its records, volumes,
// checkpoint snapshots and engine instances.
func leftovers(t *testing.T, d *dend) string {
	t.Helper()
	list, err := d.c.ListSandboxes(ctxT(t, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, sb := range list {
		names = append(names, sb.Name)
	}
	slices.Sort(names)
	dir := func(sub string) string {
		ents, _ := os.ReadDir(filepath.Join(d.dataDir, sub))
		var n []string
		for _, e := range ents {
			n = append(n, e.Name())
		}
		return strings.Join(n, ",")
	}
	return "records " + strings.Join(names, ",") + "; volumes " + dir("pool/sandboxes") + "; snapshots " + dir("pool/checkpoints") +
		"; images " + dir("checkpoints") + "; instances " + strings.Join(d.instances(), ",") + "; namespaces " + d.namespaces()
}

// Sandboxes together cannot eat the pool's reserve, whatever their caps
// promise: each writes until the pool less the reserve is taken, gets the
// quota error inside, and den still hibernates and checkpoints them. Once
// one frees its files, the other writes again.
func TestDiskReserve(t *testing.T) {
	d := startDend(t, "--pool-size", "2G", "--disk-reserve", "1G", "--default-disk", "900M")
	ctx := ctxT(t, 5*time.Minute)
	d.create("a")
	d.create("b")
	out, errs, code := d.sh("a", "dd if=/dev/zero of=/root/zeros bs=1M count=850 2>&1; sync")
	if code != 0 || strings.Contains(out+errs, "quota") {
		t.Fatalf("a writing 850M under its 900M cap, with 1G for sandboxes: exit %d %q %q", code, out, errs)
	}
	out, errs, code = d.sh("b", "dd if=/dev/zero of=/root/zeros bs=1M count=850 2>&1; echo exit $?; sync")
	if !strings.Contains(out+errs, "quota") || strings.Contains(out, "exit 0") || code != 0 {
		t.Fatalf("b writing 850M with about 170M left to sandboxes: exit %d %q %q", code, out, errs)
	}
	if sb := d.inspect("b"); sb.Usage == nil || sb.Usage.DiskBytes > 256<<20 {
		t.Fatalf("b's usage past what sandboxes may take together: %+v", sb.Usage)
	}

	// The reserve is den's: a checkpoint and a hibernation still work.
	if _, err := d.c.Checkpoint(ctx, "b", client.CheckpointOptions{}); err != nil {
		t.Fatalf("checkpointing with sandboxes at their bound: %v", err)
	}
	if _, err := d.c.Hibernate(ctx, "b"); err != nil {
		t.Fatalf("hibernating with sandboxes at their bound: %v", err)
	}
	if got := d.mustSh("b", "echo awake"); got != "awake\n" {
		t.Fatalf("after waking: %q", got)
	}

	// a frees its files; b writes again. (Files a checkpoint holds would
	// count until it is removed.)
	d.mustSh("a", "rm /root/zeros")
	waitFor(t, time.Minute, "b to write once a's files are gone", func() bool {
		syncPool(t, d)
		_, _, code := d.sh("b", "rm -f /root/more; dd if=/dev/zero of=/root/more bs=1M count=256 2>/dev/null && sync")
		return code == 0
	})
}
