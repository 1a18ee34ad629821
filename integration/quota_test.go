package integration

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

// Quotas: no sandbox asks for more than the host has, owners keep the
// process limit under dend's maximum, and an owner's sandboxes together
// stay within the quota an admin gave it. Every refusal names the quota,
// its use and limit, and leaves nothing behind.

// overQuota checks that err is dend's 403 quota refusal whose message
// has each of want.
func overQuota(t *testing.T, what string, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: accepted", what)
	}
	if !client.IsQuota(err) {
		t.Fatalf("%s: %v, want a quota refusal", what, err)
	}
	e := apiErr(t, err)
	if e.Code != api.CodeQuotaExceeded {
		t.Fatalf("%s: code %q", what, e.Code)
	}
	for _, w := range want {
		if !strings.Contains(e.Message, w) {
			t.Fatalf("%s: %q does not say %q", what, e.Message, w)
		}
	}
	if e.Hint == "" {
		t.Fatalf("%s: %q comes with no hint", what, e.Message)
	}
}

// names lists the names of c's sandboxes.
func names(t *testing.T, c *client.Client) []string {
	t.Helper()
	list, err := c.ListSandboxes(ctxT(t, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, sb := range list {
		out = append(out, sb.Name)
	}
	return out
}

func TestQuotaHostAndPIDs(t *testing.T) {
	tn := newTenants(t, "--max-pids", "4096")
	d, ctx := tn.d, ctxT(t, 5*time.Minute)
	tooManyCPUs := float64(runtime.NumCPU() + 1)
	for _, tc := range []struct {
		what string
		req  api.CreateSandboxRequest
		says string
	}{
		{"1000G of memory", api.CreateSandboxRequest{Memory: "1000G"}, "more than this host has"},
		{"more CPUs than the host", api.CreateSandboxRequest{CPUs: tooManyCPUs, Memory: "256M"}, "more than this host has"},
		{"pids over the engine's bound", api.CreateSandboxRequest{Memory: "256M", PIDs: 1048576}, "over this dend's maximum of 4096"},
		{"pids over --max-pids", api.CreateSandboxRequest{Memory: "256M", PIDs: 5000}, "over this dend's maximum of 4096"},
	} {
		tc.req.Name, tc.req.Image = "big", "busybox"
		_, err := tn.alice.CreateSandbox(ctx, tc.req)
		invalid(t, tc.what, err, tc.says)
	}
	// The host binds admins too.
	_, err := d.c.CreateSandbox(ctx, api.CreateSandboxRequest{Name: "big", Image: "busybox", Memory: "1000G"})
	invalid(t, "an admin's 1000G", err, "more than this host has")
	if got := names(t, tn.alice); len(got) != 0 {
		t.Fatalf("refused creates left %v", got)
	}

	sb := tn.create(tn.alice, "w", func(r *api.CreateSandboxRequest) { r.Memory = "8G" })
	if sb.PIDs == 0 || sb.PIDs > 4096 {
		t.Fatalf("an owner's default process limit is %d, want one within --max-pids", sb.PIDs)
	}
	zero, over, huge := 0, 5000, "1000G"
	_, err = tn.alice.SetLimits(ctx, "w", api.LimitsRequest{PIDs: &zero})
	invalid(t, "--pids 0", err, "cannot lift the process limit")
	_, err = tn.alice.SetLimits(ctx, "w", api.LimitsRequest{PIDs: &over})
	invalid(t, "--pids 5000", err, "maximum of 4096")
	_, err = tn.alice.SetLimits(ctx, "w", api.LimitsRequest{Memory: &huge})
	invalid(t, "--memory 1000G", err, "more than this host has")
	if _, errs, code := d.denAs(tn.env("alice"), "", "limits", "w", "--pids", "0"); code == 0 || !strings.Contains(errs, "hint:") {
		t.Fatalf("den limits w --pids 0: exit %d: %s", code, errs)
	}
	if got, err := tn.alice.GetSandbox(ctx, "w"); err != nil || got.PIDs != sb.PIDs || got.MemoryBytes != 8<<30 {
		t.Fatalf("after the refusals: %+v, %v", got, err)
	}
}

func TestQuotaPerOwner(t *testing.T) { testQuotaPerOwner(t) }

// testQuotaPerOwner is TestQuotaPerOwner on a dend started with extra
// flags (another store).
func testQuotaPerOwner(t *testing.T, extra ...string) {
	tn := newTenants(t, extra...)
	d, ctx := tn.d, ctxT(t, 10*time.Minute)

	// An owner cannot give itself a quota.
	_, err := tn.alice.SetOwner(ctx, client.SelfOwner, api.SetOwnerRequest{Sandboxes: ptrTo(100)})
	if !client.IsForbidden(err) {
		t.Fatalf("alice setting her own quota: %v, want forbidden", err)
	}
	if _, errs, code := d.denAs(tn.env("alice"), "", "owner", "set", "alice", "--sandboxes", "100"); code == 0 || !strings.Contains(errs, "only an admin") {
		t.Fatalf("den owner set as alice: exit %d: %s", code, errs)
	}
	d.mustDen("", "owner", "set", "alice", "--sandboxes", "3", "--memory", "1G", "--cpus", "2", "--disk", "1G", "--checkpoints", "1")

	small := func(r *api.CreateSandboxRequest) { r.Memory, r.CPUs, r.Disk = "256M", 0.5, "256M" }
	tn.create(tn.alice, "a", small)
	refusedCreate := []struct {
		what string
		mod  func(*api.CreateSandboxRequest)
		says []string
	}{
		{"memory", func(r *api.CreateSandboxRequest) { small(r); r.Memory = "1G" }, []string{"memory quota", "256MiB in use + 1GiB asked > 1GiB limit"}},
		{"cpus", func(r *api.CreateSandboxRequest) { small(r); r.CPUs = 2 }, []string{"cpus quota", "0.5 in use + 2 asked > 2 limit"}},
		{"disk", func(r *api.CreateSandboxRequest) { small(r); r.Disk = "1G" }, []string{"disk quota", "256MiB in use + 1GiB asked > 1GiB limit"}},
		// Without --disk a sandbox gets dend's default cap, and counts it.
		{"the default disk cap", func(r *api.CreateSandboxRequest) { small(r); r.Disk = "" }, []string{"disk quota", "256MiB in use + "}},
	}
	for _, tc := range refusedCreate {
		req := api.CreateSandboxRequest{Name: "b", Image: "busybox"}
		tc.mod(&req)
		_, err := tn.alice.CreateSandbox(ctx, req)
		overQuota(t, "create over "+tc.what, err, tc.says...)
	}
	mem := "2G"
	_, err = tn.alice.SetLimits(ctx, "a", api.LimitsRequest{Memory: &mem})
	overQuota(t, "limits over memory", err, "memory quota", "256MiB in use + 1.75GiB asked > 1GiB limit")

	if _, err := tn.alice.Checkpoint(ctx, "a", client.CheckpointOptions{Name: "base", FSOnly: true}); err != nil {
		t.Fatal(err)
	}
	_, err = tn.alice.Checkpoint(ctx, "a", client.CheckpointOptions{Name: "second", FSOnly: true})
	overQuota(t, "a second checkpoint", err, "checkpoints quota", "1 in use + 1 asked > 1 limit")

	// fork --count 3 would make four sandboxes: none is made.
	_, err = tn.alice.Fork(ctx, "a", client.ForkOptions{Name: "kid", Count: 3, From: "base"})
	overQuota(t, "fork --count 3", err, "sandboxes quota", "1 in use + 3 asked > 3 limit")
	if got := names(t, tn.alice); len(got) != 1 {
		t.Fatalf("after refusals alice has %v, want only a", got)
	}
	if _, err := tn.alice.Fork(ctx, "a", client.ForkOptions{Name: "kid", Count: 2, From: "base"}); err != nil {
		t.Fatalf("fork --count 2 within the quota: %v", err)
	}
	_, err = tn.alice.CreateSandbox(ctx, api.CreateSandboxRequest{Name: "c", Image: "busybox", Memory: "64M", Disk: "64M", CPUs: 0.1})
	overQuota(t, "a fourth sandbox", err, "sandboxes quota", "3 in use + 1 asked > 3 limit")
	_, err = tn.alice.CreateSandbox(ctx, api.CreateSandboxRequest{Name: "c", From: "a:base"})
	overQuota(t, "create --from", err, "sandboxes quota")
	if _, errs, code := d.denAs(tn.env("alice"), "", "fork", "a", "more", "--from", "base"); code == 0 || !strings.Contains(errs, "sandboxes quota") || !strings.Contains(errs, "hint:") {
		t.Fatalf("den fork over quota: exit %d: %s", code, errs)
	}
	if got := strings.Join(names(t, tn.alice), ","); got != "a,kid-1,kid-2" {
		t.Fatalf("after refusals alice has %s", got)
	}
	if cks, err := tn.alice.Checkpoints(ctx, "a"); err != nil || countManual(cks) != 1 {
		t.Fatalf("checkpoints of a after refusals: %d, %v", countManual(cks), err)
	}

	// A quota lowered below the use takes nothing, but a restore waits
	// until the use is under it again.
	d.mustDen("", "owner", "set", "alice", "--memory", "512M")
	_, err = tn.alice.Restore(ctx, "a", "base")
	overQuota(t, "restore over a lowered quota", err, "over its memory quota", "768MiB in use > 512MiB limit")
	d.mustDen("", "owner", "set", "alice", "--memory", "1G")
	if _, err := tn.alice.Restore(ctx, "a", "base"); err != nil {
		t.Fatalf("restore within the quota: %v", err)
	}

	// The use is shown to admins and to the owner itself.
	show := strings.Join(strings.Fields(d.mustDen("", "owner", "show", "alice")), " ")
	for _, want := range []string{"sandboxes: 3/3", "memory: 768MiB/1GiB", "cpus: 1.5/2", "checkpoints: 1/1", "set by an admin"} {
		if !strings.Contains(show, want) {
			t.Errorf("den owner show alice lacks %q:\n%s", want, show)
		}
	}
	self, errs, code := d.denAs(tn.env("alice"), "", "owner", "show", "self")
	if code != 0 || !strings.Contains(self, "3/3") {
		t.Fatalf("den owner show self as alice: exit %d: %s%s", code, self, errs)
	}
	if _, errs, code := d.denAs(tn.env("alice"), "", "owner", "show", "bob"); code == 0 || !strings.Contains(errs, "only its own") {
		t.Fatalf("den owner show bob as alice: exit %d: %s", code, errs)
	}
	tokens := d.mustDen("", "token", "ls")
	if !strings.Contains(tokens, "sbx 3/3, mem 768MiB/1GiB, cpu 1.5/2") || !strings.Contains(tokens, "sbx 0/50") {
		t.Errorf("den token ls does not show use against quota:\n%s", tokens)
	}
	owners := d.mustDen("", "owner", "ls")
	if !strings.Contains(owners, "alice") || !strings.Contains(owners, "bob") {
		t.Errorf("den owner ls:\n%s", owners)
	}

	// bob has dend's default quota, untouched by alice's.
	tn.create(tn.bob, "b")
	o, err := tn.bob.Owner(ctx, client.SelfOwner)
	if err != nil || !o.Default || o.Use.Sandboxes != 1 || o.Quota.Sandboxes != 50 {
		t.Fatalf("bob's quota: %+v, %v", o, err)
	}
}

func countManual(cks []api.Checkpoint) int {
	n := 0
	for _, ck := range cks {
		if ck.Kind == "manual" {
			n++
		}
	}
	return n
}

// The private-range grant: a rule into a private range dend opens to no
// one is refused until an admin grants the range to that owner, and only
// to that one; the grant cannot be taken back while a rule needs it.
func TestQuotaPrivateGrant(t *testing.T) {
	tn := newTenants(t)
	d, ctx := tn.d, ctxT(t, 5*time.Minute)
	tn.create(tn.alice, "p")
	rule := api.NetworkPolicy{Mode: api.NetworkAllow, Allow: []string{"192.168.77.0/24:5432"}}
	_, err := tn.alice.SetNetwork(ctx, "p", rule)
	invalid(t, "a rule into an unopened private range", err, "not opened")

	d.mustDen("", "owner", "set", "alice", "--allow-private", "192.168.77.0/24")
	if _, err := tn.alice.SetNetwork(ctx, "p", rule); err != nil {
		t.Fatalf("the granted range: %v", err)
	}
	_, err = tn.bob.CreateSandbox(ctx, api.CreateSandboxRequest{Name: "q", Image: "busybox", Memory: "256M", Network: &rule})
	invalid(t, "bob naming alice's grant", err, "not opened")
	if _, err := tn.alice.Owner(ctx, client.SelfOwner); err != nil {
		t.Fatal(err)
	}

	_, errs, code := d.denAs(nil, "", "owner", "set", "alice", "--allow-private", "")
	if code == 0 || !strings.Contains(errs, `sandboxes p of owner`) {
		t.Fatalf("taking back a grant a rule needs: exit %d: %s", code, errs)
	}
	if o, err := d.c.Owner(ctx, "alice"); err != nil || fmt.Sprint(o.AllowPrivate) != "[192.168.77.0/24]" {
		t.Fatalf("after the refusal alice's grants are %v (%v)", o.AllowPrivate, err)
	}
	if _, err := tn.alice.SetNetwork(ctx, "p", api.NetworkPolicy{Mode: api.NetworkNone}); err != nil {
		t.Fatal(err)
	}
	d.mustDen("", "owner", "set", "alice", "--allow-private", "")
	_, err = tn.alice.SetNetwork(ctx, "p", rule)
	invalid(t, "the range once the grant is gone", err, "not opened")
}

func ptrTo[T any](v T) *T { return &v }
