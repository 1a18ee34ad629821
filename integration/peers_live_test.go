package integration

import (
	"strings"
	"testing"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

// watchScript runs in the reader for the whole test: one process, started
// before any view, that writes its pid and then, every 100 ms, what it
// reads through the views (or "none" for a view that is not there).
const watchScript = `echo $$ > /tmp/watch.pid
while true; do
  { cat /peers/coder/work/a.txt 2>/dev/null || echo none; cat /peers/live/work/a.txt 2>/dev/null || echo none
    cat /review/base/work/a.txt 2>/dev/null || echo none; } > /tmp/seen.new
  mv /tmp/seen.new /tmp/seen
  sleep 0.1
done`

// Views come, change and go while the reader runs, under /peers and
// elsewhere (--at /review/base, which den-init binds): the process that
// was running before the view was added sees it, sees a refresh and sees
// it go, with the same pid and no new generation; a live view shows what
// the peer writes after the add; none can be written; and hibernating
// and waking the reader keeps them, and a refresh after the wake shows. On both
// storage pools: a copy pool's views are copies, placed the same way.
func TestPeerLiveViews(t *testing.T) {
	for _, storage := range []string{"btrfs", "copy"} {
		t.Run(storage, func(t *testing.T) { testPeerLiveViews(t, storage) })
	}
}

func testPeerLiveViews(t *testing.T, storage string) {
	d := startDend(t, "--storage", storage)
	ctx := ctxT(t, 10*time.Minute)
	d.create("coder")
	d.create("reviewer")
	d.mustSh("coder", `mkdir -p /work && printf 'v1\n' > /work/a.txt`)
	watcher, err := d.c.ExecDetached(ctx, "reviewer", api.ExecRequest{Argv: []string{"sh", "-c", watchScript}})
	if err != nil {
		t.Fatal(err)
	}
	waitSeen := func(want string) {
		t.Helper()
		var got string
		waitFor(t, 20*time.Second, "the watcher to read "+want, func() bool {
			got, _, _ = d.sh("reviewer", "cat /tmp/seen")
			return got == want
		})
	}
	waitSeen("none\nnone\nnone\n")
	pid := d.mustSh("reviewer", "cat /tmp/watch.pid")
	gen := sandboxAs(t, d.c, "reviewer").Generation

	// Added without --restart: the running process reads it.
	out := d.mustDen("", "peer", "add", "reviewer", "coder")
	if !strings.Contains(out, "its processes kept running") {
		t.Errorf("den peer add said %q", out)
	}
	waitSeen("v1\nnone\nnone\n")

	// A refresh shows coder's new file to the same process.
	d.mustSh("coder", `printf 'v2\n' > /work/a.txt`)
	if got := d.mustSh("reviewer", "cat /peers/coder/work/a.txt"); got != "v1\n" {
		t.Errorf("the snapshot view before refresh shows %q, want v1", got)
	}
	d.mustDen("", "peer", "refresh", "reviewer", "coder")
	waitSeen("v2\nnone\nnone\n")

	// A live view shows what coder writes after it was added.
	out = d.mustDen("", "peer", "add", "reviewer", "coder", "--live", "--at", "/peers/live")
	if !strings.Contains(out, "live") {
		t.Errorf("den peer add --live said %q", out)
	}
	waitSeen("v2\nv2\nnone\n")
	d.mustSh("coder", `printf 'v3\n' > /work/a.txt && sync`)
	waitSeen("v2\nv3\nnone\n")

	// A view elsewhere is added and refreshed the same way.
	out = d.mustDen("", "peer", "add", "reviewer", "coder", "--at", "/review/base")
	if !strings.Contains(out, "its processes kept running") {
		t.Errorf("den peer add --at /review/base said %q", out)
	}
	waitSeen("v2\nv3\nv3\n")
	d.mustSh("coder", `printf 'v3c\n' > /work/a.txt && sync`)
	waitSeen("v2\nv3c\nv3\n")
	d.mustDen("", "peer", "refresh", "reviewer", "/review/base")
	waitSeen("v2\nv3c\nv3c\n")
	ps := peersAs(t, d.c, "reviewer")
	if len(ps) != 3 || ps[0].Live || !ps[1].Live || ps[2].Live || ps[2].At != "/review/base" {
		t.Errorf("peers: %+v; want a snapshot view, a live one, and a snapshot at /review/base", ps)
	}

	// Neither can be written, by the reader or through the file API.
	for _, w := range []string{"echo x > /peers/coder/work/a.txt", "touch /peers/live/work/new", "rm /peers/live/work/a.txt", "mkdir /peers/live/d", "touch /review/base/work/x"} {
		d.mustBeReadOnly("reviewer", w)
	}
	if err := d.c.WriteFile(ctx, "reviewer", "/peers/live/work/a.txt", 0o644, strings.NewReader("x")); err == nil {
		t.Error("writing into the live view through the file API succeeded")
	}
	if got := d.mustSh("coder", "cat /work/a.txt; ls /work"); got != "v3c\na.txt\n" {
		t.Errorf("coder's files after the reader's writes: %q", got)
	}
	// Bad input changes nothing.
	_, err = d.c.AddPeer(ctx, "reviewer", api.AddPeerRequest{Sandbox: "coder", Live: true, Checkpoint: "x", At: "/peers/ck"})
	if e := apiErr(t, err); e.Code != api.CodeInvalid || !strings.Contains(e.Message, "live") {
		t.Errorf("a live view of a checkpoint: %+v", e)
	}

	if g := sandboxAs(t, d.c, "reviewer").Generation; g != gen {
		t.Errorf("reviewer's generation went from %d to %d on adds and a refresh: it was restarted", gen, g)
	}

	// A fork gets copies of the snapshot views and a live view of its own.
	kids, err := d.c.Fork(ctx, "reviewer", client.ForkOptions{Name: "reviewer-kid"})
	if err != nil {
		t.Fatalf("forking reviewer: %v", err)
	}
	if ps := peersAs(t, d.c, "reviewer-kid"); len(ps) != 3 || !ps[1].Live {
		t.Errorf("fork's peers: %+v", ps)
	}
	d.mustSh("coder", `printf 'v3b\n' > /work/a.txt && sync`)
	if got := d.mustSh("reviewer-kid", "cat /peers/coder/work/a.txt /peers/live/work/a.txt /review/base/work/a.txt"); got != "v2\nv3b\nv3c\n" {
		t.Errorf("the fork's views show %q, want v2, v3b and v3c", got)
	}
	d.mustBeReadOnly("reviewer-kid", "touch /peers/live/work/x")
	if err := d.c.RemoveSandbox(ctx, kids[0].Name, true); err != nil {
		t.Fatal(err)
	}
	waitSeen("v2\nv3b\nv3c\n")

	// Hibernated and woken, the reader still has both, with its process.
	if _, err := d.c.Hibernate(ctx, "reviewer"); err != nil {
		t.Fatal(err)
	}
	d.mustSh("coder", `printf 'v4\n' > /work/a.txt && sync`)
	if _, err := d.c.Resume(ctx, "reviewer"); err != nil {
		t.Fatal(err)
	}
	waitSeen("v2\nv4\nv3c\n")
	gen = sandboxAs(t, d.c, "reviewer").Generation
	d.mustDen("", "peer", "refresh", "reviewer", "/review/base")
	waitSeen("v2\nv4\nv4\n")

	// Removed, both vanish for the same process.
	d.mustDen("", "peer", "rm", "reviewer", "/peers/coder")
	d.mustDen("", "peer", "rm", "reviewer", "/peers/live")
	d.mustDen("", "peer", "rm", "reviewer", "/review/base")
	waitSeen("none\nnone\nnone\n")
	if got := d.mustSh("reviewer", "ls -A /peers; cat /tmp/watch.pid"); got != pid {
		t.Errorf("after removal /peers and the watcher's pid: %q, want empty and %q", got, pid)
	}
	if r, err := d.c.GetRun(ctx, "reviewer", watcher.ID); err != nil || r.Status != "running" {
		t.Errorf("the watcher after every change: %+v, %v", r, err)
	}
	if g := sandboxAs(t, d.c, "reviewer").Generation; g != gen {
		t.Errorf("reviewer's generation went from %d to %d on a refresh and removals: it was restarted", gen, g)
	}
}
