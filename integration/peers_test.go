package integration

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

// filesDigest is what a sandbox's /work holds, byte for byte: each
// file's checksum, size and mode, and the directories.
const filesDigest = `cd /work && find . -type f | sort | xargs md5sum && find . -type f -exec stat -c '%n %s %a %u' {} + | sort && find . -type d | sort`

// mustBeReadOnly runs script in name, which must fail saying "Read-only file
// system".
func (d *dend) mustBeReadOnly(name, script string) {
	d.t.Helper()
	out, errs, code := d.sh(name, script)
	if code == 0 || !strings.Contains(out+errs, "Read-only file system") {
		d.t.Errorf("%q in %s: exit %d, %q %q; want it refused with EROFS", script, name, code, out, errs)
	}
}

// sandboxAs and peersAs get a sandbox and its views with c, failing the
// test if they cannot.
func sandboxAs(t *testing.T, c *client.Client, name string) *api.Sandbox {
	t.Helper()
	sb, err := c.GetSandbox(ctxT(t, time.Minute), name)
	if err != nil {
		t.Fatalf("getting %s: %v", name, err)
	}
	return sb
}

func peersAs(t *testing.T, c *client.Client, name string) []api.Peer {
	t.Helper()
	ps, err := c.Peers(ctxT(t, time.Minute), name)
	if err != nil {
		t.Fatalf("listing the peers of %s: %v", name, err)
	}
	return ps
}

// Peering end to end on real runsc and btrfs: a sandbox reads another's
// files through a view that cannot be written, that shows a snapshot
// until refreshed, that survives hibernation and restore, that forks
// copy, and that outlives the sandbox it shows; the sandbox viewed is
// never changed and never sees its viewer.
func TestPeerView(t *testing.T) {
	d := startDend(t)
	ctx := ctxT(t, 10*time.Minute)
	d.create("coder")
	d.create("reviewer")
	d.mustSh("coder", `mkdir -p /work/src && printf 'v1\n' > /work/a.txt && head -c 100000 /dev/urandom > /work/src/blob && chmod 640 /work/src/blob`)
	before := d.mustSh("coder", filesDigest)

	// A paused viewer needs --restart (or a resume) for a view outside
	// /peers, which den-init mounts (a running one changes live:
	// TestPeerLiveViews): refused without, nothing changed.
	if _, err := d.c.Pause(ctx, "reviewer"); err != nil {
		t.Fatal(err)
	}
	out, errs, code := d.denAs(nil, "", "peer", "add", "reviewer", "coder", "--at", "/review/now")
	if code == 0 || !strings.Contains(errs, "--restart") || !strings.Contains(errs, "den resume reviewer") {
		t.Fatalf("peer add outside /peers on a paused sandbox without --restart: %d %q %q", code, out, errs)
	}
	if ps, err := d.c.Peers(ctx, "reviewer"); err != nil || len(ps) != 0 {
		t.Fatalf("peers after a refused add: %+v, %v", ps, err)
	}
	if _, err := d.c.Resume(ctx, "reviewer"); err != nil {
		t.Fatal(err)
	}
	gen := sandboxAs(t, d.c, "reviewer").Generation
	out = d.mustDen("", "peer", "add", "reviewer", "coder", "--restart")
	if !strings.Contains(out, "/peers/coder") || !strings.Contains(out, "read-only") {
		t.Errorf("den peer add said %q", out)
	}
	if sb := sandboxAs(t, d.c, "reviewer"); sb.State != api.StateRunning || sb.Generation <= gen {
		t.Errorf("reviewer after add --restart: %s generation %d (was %d)", sb.State, sb.Generation, gen)
	}

	// The view shows coder's files, and cannot be written.
	if got := d.mustSh("reviewer", "cat /peers/coder/work/a.txt"); got != "v1\n" {
		t.Errorf("view shows %q, want v1", got)
	}
	if got := d.mustSh("reviewer", strings.Replace(filesDigest, "/work", "/peers/coder/work", 1)); got != before {
		t.Errorf("view differs from coder's files:\n%s\nwant\n%s", got, before)
	}
	for _, w := range []string{
		"echo x > /peers/coder/work/a.txt",
		"echo x >> /peers/coder/work/a.txt",
		"touch /peers/coder/new",
		"rm /peers/coder/work/a.txt",
		"mkdir /peers/coder/work/d",
		"mv /peers/coder/work/a.txt /peers/coder/work/b.txt",
		"chmod 777 /peers/coder/work/a.txt",
		"ln -s x /peers/coder/work/l",
	} {
		d.mustBeReadOnly("reviewer", w)
	}
	// Nor through dend's file API, as root in the sandbox.
	if err := d.c.WriteFile(ctx, "reviewer", "/peers/coder/work/a.txt", 0o644, strings.NewReader("x")); err == nil {
		t.Error("writing into the view through the file API succeeded")
	}
	if got := d.mustSh("coder", filesDigest); got != before {
		t.Errorf("coder's files changed:\n%s\nwant\n%s", got, before)
	}
	// coder never sees its viewer: its own views directory is empty.
	if got, errs, code := d.sh("coder", "ls -A /peers"); got != "" {
		t.Errorf("coder's /peers holds %q (%d %q)", got, code, errs)
	}
	if ps, err := d.c.Peers(ctx, "coder"); err != nil || len(ps) != 0 {
		t.Errorf("coder's peers: %+v, %v", ps, err)
	}

	// A snapshot: coder's later writes show only once refreshed.
	d.mustSh("coder", `printf 'v2\n' > /work/a.txt`)
	if got := d.mustSh("reviewer", "cat /peers/coder/work/a.txt"); got != "v1\n" {
		t.Errorf("view before refresh shows %q, want v1", got)
	}
	d.mustDen("", "peer", "refresh", "reviewer", "coder", "--restart")
	if got := d.mustSh("reviewer", "cat /peers/coder/work/a.txt"); got != "v2\n" {
		t.Errorf("view after refresh shows %q, want v2", got)
	}

	// A checkpoint's view, elsewhere.
	if _, err := d.c.Checkpoint(ctx, "coder", client.CheckpointOptions{Name: "base", FSOnly: true}); err != nil {
		t.Fatal(err)
	}
	d.mustSh("coder", `printf 'v3\n' > /work/a.txt`)
	d.mustDen("", "peer", "add", "reviewer", "coder", "--checkpoint", "base", "--at", "/review/base", "--restart")
	if got := d.mustSh("reviewer", "cat /review/base/work/a.txt /peers/coder/work/a.txt"); got != "v2\nv2\n" {
		t.Errorf("checkpoint view and live view show %q, want v2 twice", got)
	}
	d.mustBeReadOnly("reviewer", "touch /review/base/x")

	// Refusals change nothing.
	peersNow := peersAs(t, d.c, "reviewer")
	genNow := sandboxAs(t, d.c, "reviewer").Generation
	for _, tc := range []struct {
		req  api.AddPeerRequest
		code string
		says string
	}{
		{api.AddPeerRequest{Sandbox: "reviewer", Restart: true}, api.CodeInvalid, "itself"},
		{api.AddPeerRequest{Sandbox: "nosuch", Restart: true}, api.CodeNotFound, `sandbox "nosuch" not found`},
		{api.AddPeerRequest{Sandbox: "coder", Checkpoint: "nosuch", At: "/x", Restart: true}, api.CodeNotFound, "nosuch"},
		{api.AddPeerRequest{Sandbox: "coder", At: "peers/x", Restart: true}, api.CodeInvalid, "not an absolute path"},
		{api.AddPeerRequest{Sandbox: "coder", At: "/peers/../etc", Restart: true}, api.CodeInvalid, ".."},
		{api.AddPeerRequest{Sandbox: "coder", At: "/proc/x", Restart: true}, api.CodeInvalid, "den's own mount"},
		{api.AddPeerRequest{Sandbox: "coder", Restart: true}, api.CodeConflict, "collides"},
		{api.AddPeerRequest{Sandbox: "coder", At: "/review/base/deeper", Restart: true}, api.CodeConflict, "collides"},
	} {
		_, err := d.c.AddPeer(ctx, "reviewer", tc.req)
		if e := apiErr(t, err); e.Code != tc.code || !strings.Contains(e.Message, tc.says) {
			t.Errorf("add %+v: %+v; want %s saying %q", tc.req, e, tc.code, tc.says)
		}
	}
	if ps := peersAs(t, d.c, "reviewer"); len(ps) != len(peersNow) {
		t.Errorf("refused adds changed the peers: %+v", ps)
	}
	if g := sandboxAs(t, d.c, "reviewer").Generation; g != genNow {
		t.Errorf("refused adds restarted reviewer: generation %d, was %d", g, genNow)
	}

	// Hibernation keeps the views, read-only, with a process alive.
	sleeper, err := d.c.ExecDetached(ctx, "reviewer", api.ExecRequest{Argv: []string{"sleep", "3600"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.c.Hibernate(ctx, "reviewer"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.c.AddPeer(ctx, "reviewer", api.AddPeerRequest{Sandbox: "coder", At: "/z", Restart: true}); apiErr(t, err).Code != api.CodeConflict {
		t.Errorf("adding a peer to a hibernated sandbox: %v", err)
	}
	if _, err := d.c.Resume(ctx, "reviewer"); err != nil {
		t.Fatal(err)
	}
	if got := d.mustSh("reviewer", "cat /review/base/work/a.txt /peers/coder/work/a.txt"); got != "v2\nv2\n" {
		t.Errorf("views after hibernate and wake: %q", got)
	}
	if r, err := d.c.GetRun(ctx, "reviewer", sleeper.ID); err != nil || r.Status != "running" {
		t.Errorf("the process that slept with reviewer: %+v, %v", r, err)
	}
	d.mustBeReadOnly("reviewer", "touch /peers/coder/x")

	// A memory checkpoint restores with the views...
	ck, err := d.c.Checkpoint(ctx, "reviewer", client.CheckpointOptions{Name: "two-views"})
	if err != nil {
		t.Fatal(err)
	}
	d.mustSh("reviewer", "rm /tmp/marker 2>/dev/null; echo later > /root/later")
	if _, err := d.c.Restore(ctx, "reviewer", ck.ID); err != nil {
		t.Fatalf("restoring reviewer with its views: %v", err)
	}
	if got := d.mustSh("reviewer", "cat /review/base/work/a.txt /peers/coder/work/a.txt; test -e /root/later || echo rewound"); got != "v2\nv2\nrewound\n" {
		t.Errorf("after restore: %q", got)
	}
	d.mustBeReadOnly("reviewer", "touch /review/base/x")

	// ... and a fork gets views of its own.
	kids, err := d.c.Fork(ctx, "reviewer", client.ForkOptions{Name: "reviewer-kid"})
	if err != nil {
		t.Fatalf("forking reviewer: %v", err)
	}
	if ps := peersAs(t, d.c, "reviewer-kid"); len(ps) != 2 {
		t.Errorf("fork's peers: %+v", ps)
	}
	if got := d.mustSh("reviewer-kid", "cat /peers/coder/work/a.txt"); got != "v2\n" {
		t.Errorf("fork's view shows %q", got)
	}
	d.mustBeReadOnly("reviewer-kid", "touch /peers/coder/x")
	if err := d.c.RemoveSandbox(ctx, kids[0].Name, true); err != nil {
		t.Fatal(err)
	}

	// With a view fewer, the memory image taken with two is refused,
	// saying why, and reviewer is left as it was.
	d.mustDen("", "peer", "rm", "reviewer", "/review/base", "--restart")
	_, err = d.c.Restore(ctx, "reviewer", ck.ID)
	if e := apiErr(t, err); e.Code != api.CodeConflict || !strings.Contains(e.Message, "/review/base") {
		t.Errorf("restoring a memory image taken with other views: %+v", e)
	}
	if sb := sandboxAs(t, d.c, "reviewer"); sb.State != api.StateRunning {
		t.Errorf("reviewer after the refused restore: %s", sb.State)
	}
	if _, _, code := d.sh("reviewer", "ls /review/base/work"); code == 0 {
		t.Error("the removed view is still mounted")
	}

	// coder's removal leaves reviewer's view whole; refreshing it says
	// coder is gone.
	if err := d.c.RemoveSandbox(ctx, "coder", true); err != nil {
		t.Fatal(err)
	}
	if got := d.mustSh("reviewer", "cat /peers/coder/work/a.txt"); got != "v2\n" {
		t.Errorf("view after coder's removal shows %q", got)
	}
	_, err = d.c.RefreshPeer(ctx, "reviewer", "coder", api.RefreshPeerRequest{Restart: true})
	if e := apiErr(t, err); e.Code != api.CodeNotFound || !strings.Contains(e.Message, "gone") {
		t.Errorf("refreshing a view of a removed sandbox: %+v", e)
	}

	// reviewer's removal takes its views.
	views, _ := filepath.Glob(filepath.Join(d.dataDir, "pool", "peers", "*"))
	if len(views) != 1 {
		t.Errorf("views on the pool before removal: %v", views)
	}
	if err := d.c.RemoveSandbox(ctx, "reviewer", true); err != nil {
		t.Fatal(err)
	}
	if views, _ := filepath.Glob(filepath.Join(d.dataDir, "pool", "peers", "*")); len(views) != 0 {
		t.Errorf("views left on the pool: %v", views)
	}
}

// A sandbox of another owner cannot be viewed: it is not found, in the
// very words for one that does not exist, and nothing changes.
func TestPeerAcrossOwners(t *testing.T) {
	tn := newTenants(t)
	d, ctx := tn.d, ctxT(t, 5*time.Minute)
	a1 := tn.create(tn.alice, "a1")
	tn.create(tn.alice, "a2")
	b1 := tn.create(tn.bob, "b1")
	d.create("r1")
	d.mustSh("b1", "echo secret > /root/bob.txt")
	if _, err := tn.alice.StopSandbox(ctx, "a1"); err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{"b1", b1.ID, "r1", "nosuch"} {
		_, err := tn.alice.AddPeer(ctx, "a1", api.AddPeerRequest{Sandbox: ref})
		if e := apiErr(t, err); e.Code != api.CodeNotFound || e.Message != `sandbox "`+ref+`" not found` {
			t.Errorf("alice viewing %s: %+v", ref, e)
		}
	}
	// Through the CLI too.
	if _, errs, code := d.denAs(tn.env("alice"), "", "peer", "add", "a1", "b1"); code == 0 || !strings.Contains(errs, `sandbox "b1" not found`) {
		t.Errorf("den peer add as alice of bob's: %d %q", code, errs)
	}
	// Nor can bob touch alice's views.
	if _, err := tn.bob.Peers(ctx, "a1"); !client.IsNotFound(err) {
		t.Errorf("bob listing alice's peers: %v", err)
	}
	if _, err := tn.bob.AddPeer(ctx, a1.ID, api.AddPeerRequest{Sandbox: "b1"}); !client.IsNotFound(err) {
		t.Errorf("bob adding a view to alice's sandbox: %v", err)
	}
	if ps, err := tn.alice.Peers(ctx, "a1"); err != nil || len(ps) != 0 {
		t.Errorf("alice's peers after refusals: %+v, %v", ps, err)
	}
	if sb := sandboxAs(t, tn.bob, "b1"); sb.State != api.StateRunning || sb.Generation != b1.Generation {
		t.Errorf("bob's sandbox after alice's tries: %s generation %d", sb.State, sb.Generation)
	}
	// Her own she may view.
	if _, err := tn.alice.AddPeer(ctx, "a1", api.AddPeerRequest{Sandbox: "a2"}); err != nil {
		t.Fatalf("alice viewing her own: %v", err)
	}
	if _, err := tn.alice.StartSandbox(ctx, "a1"); err != nil {
		t.Fatal(err)
	}
	if _, _, code := d.sh(a1.ID, "ls /peers/a2/root"); code != 0 {
		t.Error("alice's view of her own sandbox is not there")
	}
}
