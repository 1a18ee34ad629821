package integration

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/internal/guest"
	denns "github.com/den-dev/den/internal/netns"
)

// warmNote is what dend notes of each warm-pool instance.
type warmNote struct {
	ID    string `json:"id"`
	Token string `json:"token"`
	Slot  int    `json:"slot"`
}

// warmNotes reads the notes of the pool instances d keeps now.
func (d *dend) warmNotes() map[string]warmNote {
	d.t.Helper()
	dir := filepath.Join(d.dataDir, "warm", "instances")
	ents, err := os.ReadDir(dir)
	if err != nil {
		d.t.Fatalf("reading warm notes: %v", err)
	}
	out := map[string]warmNote{}
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		var n warmNote
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil || json.Unmarshal(b, &n) != nil {
			continue // being written or removed
		}
		out[n.ID] = n
	}
	return out
}

// warmPool is d's pool of image, or nil.
func (d *dend) warmPool(image string) *api.WarmPool {
	d.t.Helper()
	im, err := d.c.GetImage(ctxT(d.t, 30*time.Second), image)
	if err != nil {
		d.t.Fatalf("reading image %s: %v", image, err)
	}
	return im.Warm
}

// waitWarm waits until image's pool has ready instances and no boot
// under way.
func (d *dend) waitWarm(image string, ready int) {
	d.t.Helper()
	waitFor(d.t, 90*time.Second, fmt.Sprintf("%d warm instances of %s", ready, image), func() bool {
		p := d.warmPool(image)
		return p != nil && p.Ready == ready && p.Booting == 0 && len(d.warmNotes()) == ready
	})
}

// setWarm sets image's pool, for sandboxes of 256M like d.create's.
func (d *dend) setWarm(image string, n int) {
	d.t.Helper()
	if _, err := d.c.SetWarm(ctxT(d.t, 30*time.Second), image, api.SetWarmRequest{Count: n, MemoryBytes: 256 << 20}); err != nil {
		d.t.Fatalf("den image warm %s %d: %v", image, n, err)
	}
}

func (d *dend) buildBusybox() {
	d.t.Helper()
	if _, err := d.c.BuildImage(ctxT(d.t, 3*time.Minute), api.BuildImageRequest{Name: "busybox"}, nil); err != nil {
		d.t.Fatalf("building busybox: %v", err)
	}
}

// claimedFromPool reports whether sb's history says it was a warm
// instance.
func (d *dend) claimedFromPool(name string) bool {
	d.t.Helper()
	evs, err := d.c.Events(ctxT(d.t, 30*time.Second), name)
	if err != nil {
		d.t.Fatalf("history of %s: %v", name, err)
	}
	for _, ev := range evs {
		if strings.Contains(ev.Message, "claimed from the warm pool") {
			return true
		}
	}
	return false
}

// identity is what tells one booted instance from another, as seen inside.
type identity struct {
	hostname, bootID, random, env, procs, tmp string
}

func (d *dend) identityOf(name string) identity {
	d.t.Helper()
	out := d.mustSh(name, `hostname; cat /proc/sys/kernel/random/boot_id; head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n'; echo;
echo "$WHO"; ls -A /tmp /root | tr '\n' ' '`)
	f := strings.Split(out, "\n")
	if len(f) < 5 {
		d.t.Fatalf("identity of %s: %q", name, out)
	}
	// Alone, so no pipeline's half-started processes show.
	procs := strings.Join(strings.Fields(d.mustSh(name, "ps -o comm")), " ")
	return identity{hostname: f[0], bootID: f[1], random: f[2], env: f[3], tmp: f[4], procs: procs}
}

// Creates racing for a warm pool: each instance goes to one sandbox, the
// rest boot cold, and a claimed sandbox cannot be told from a cold one
// from inside: its own name, boot id, entropy, env, only its own
// processes, no files from the pool; the pool's token no longer opens
// its den-init. The pool then refills with new instances.
func TestWarmPoolClaims(t *testing.T) {
	d := startDend(t)
	d.buildBusybox()
	d.setWarm("busybox", 3)
	d.waitWarm("busybox", 3)
	pool := d.warmNotes()

	const n = 5
	sbs := make([]*api.Sandbox, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("race-%d", i)
			req := api.CreateSandboxRequest{Name: name, Image: "busybox", Memory: "256M", Env: map[string]string{"WHO": name},
				Labels: map[string]string{"i": fmt.Sprint(i)}}
			if i == 0 {
				req.CPUs = 0.5 // other limits than the pool's
			}
			sbs[i], errs[i] = d.c.CreateSandbox(ctxT(t, 3*time.Minute), req)
		}()
	}
	wg.Wait()
	ids := map[string]bool{}
	claimed := 0
	for i, sb := range sbs {
		if errs[i] != nil {
			t.Fatalf("create %d: %v", i, errs[i])
		}
		if ids[sb.ID] {
			t.Fatalf("two sandboxes got id %s", sb.ID)
		}
		ids[sb.ID] = true
		_, fromPool := pool[sb.ID]
		if fromPool != d.claimedFromPool(sb.Name) {
			t.Errorf("%s: id from the pool %v, history says claimed %v", sb.Name, fromPool, d.claimedFromPool(sb.Name))
		}
		if fromPool {
			claimed++
		}
		if sb.State != "running" || sb.Labels["i"] != fmt.Sprint(i) {
			t.Errorf("%s: state %s labels %v", sb.Name, sb.State, sb.Labels)
		}
	}
	if claimed != 3 {
		t.Fatalf("%d of %d creates claimed one of the 3 warm instances", claimed, n)
	}

	var cold identity
	seenBoot, seenRandom := map[string]string{}, map[string]string{}
	for _, sb := range sbs {
		id := d.identityOf(sb.Name)
		if id.hostname != sb.Name || id.env != sb.Name {
			t.Errorf("%s: hostname %q, WHO=%q", sb.Name, id.hostname, id.env)
		}
		if other, dup := seenBoot[id.bootID]; dup {
			t.Errorf("%s and %s share boot_id %s", sb.Name, other, id.bootID)
		}
		if other, dup := seenRandom[id.random]; dup || len(id.random) != 32 {
			t.Errorf("%s and %s read the same random bytes %q", sb.Name, other, id.random)
		}
		seenBoot[id.bootID], seenRandom[id.random] = sb.Name, sb.Name
		if _, fromPool := pool[sb.ID]; !fromPool {
			cold = id
		}
	}
	for _, sb := range sbs {
		if _, fromPool := pool[sb.ID]; !fromPool {
			continue
		}
		id := d.identityOf(sb.Name)
		if id.procs != cold.procs || id.tmp != cold.tmp {
			t.Errorf("claimed %s sees processes %q and files %q; a cold one %q and %q", sb.Name, id.procs, id.tmp, cold.procs, cold.tmp)
		}
		note := pool[sb.ID]
		g := guest.New(netip.MustParseAddrPort(sb.Address+":49900"), note.Token)
		if _, err := g.Ping(ctxT(t, 10*time.Second)); err == nil || !strings.Contains(err.Error(), "token") {
			t.Errorf("%s: the pool's token still opens its den-init (%v)", sb.Name, err)
		}
		g.Close()
	}
	if _, fromPool := pool[sbs[0].ID]; fromPool {
		quota, _ := os.ReadFile(fmt.Sprintf("/sys/fs/cgroup/cpu/den/%s-g1/cpu.cfs_quota_us", sbs[0].ID))
		if strings.TrimSpace(string(quota)) != "50000" {
			t.Errorf("claimed %s with 0.5 CPUs has CPU quota %q", sbs[0].Name, quota)
		}
	}

	// A claimed sandbox is a sandbox like any: it hibernates and wakes
	// with its name and files.
	for _, sb := range sbs {
		if _, fromPool := pool[sb.ID]; !fromPool {
			continue
		}
		d.mustSh(sb.Name, "echo kept > /root/f")
		if _, err := d.c.Hibernate(ctxT(t, time.Minute), sb.Name); err != nil {
			t.Fatalf("hibernating claimed %s: %v", sb.Name, err)
		}
		if got := strings.TrimSpace(d.mustSh(sb.Name, "hostname; cat /root/f")); got != sb.Name+"\nkept" {
			t.Errorf("claimed %s after hibernation: %q", sb.Name, got)
		}
		break
	}

	d.waitWarm("busybox", 3)
	for id := range d.warmNotes() {
		if ids[id] {
			t.Errorf("the refilled pool still notes %s, now a sandbox", id)
		}
	}
}

// A claim that fails (here: a process was started in the pool instance
// behind den-init's back, so den-init refuses) falls back to a cold boot:
// the create succeeds, and nothing of the instance is left.
func TestWarmClaimFailureBootsCold(t *testing.T) {
	d := startDend(t)
	d.buildBusybox()
	d.setWarm("busybox", 1)
	d.waitWarm("busybox", 1)
	var poolID string
	for id := range d.warmNotes() {
		poolID = id
	}
	inst := poolID + "-g1"
	// runsc leaves a process that waits for sleep: it must not hold a
	// pipe of ours, or this would wait as long.
	outf, err := os.CreateTemp(t.TempDir(), "exec")
	if err != nil {
		t.Fatal(err)
	}
	defer outf.Close()
	cmd := exec.Command(filepath.Join(binDir, "runsc"), "--root="+d.runscRoot(), "--platform=systrap",
		"--network=sandbox", "--overlay2=none", "--host-uds=none",
		"exec", "--detach", inst, "/bin/sleep", "1000")
	cmd.Stdout, cmd.Stderr = outf, outf
	if err := cmd.Run(); err != nil {
		out, _ := os.ReadFile(outf.Name())
		t.Fatalf("runsc exec: %v: %s", err, out)
	}

	sb := d.create("fallback")
	if !strings.Contains(d.logs(), "claiming a warm instance failed; booting cold") {
		t.Fatalf("the claim did not fail as meant; log:\n%s", tail(d.logs(), 3000))
	}
	if d.claimedFromPool("fallback") {
		t.Error("history says claimed, but it booted cold")
	}
	if ps := d.mustSh("fallback", "ps -o comm"); strings.Contains(ps, "sleep") {
		t.Errorf("the cold sandbox has the pool instance's process:\n%s", ps)
	}
	if got := d.identityOf("fallback").hostname; got != "fallback" {
		t.Errorf("hostname %q", got)
	}
	d.waitWarm("busybox", 1)
	d.checkNoStrays(sb.ID)
}

// checkNoStrays fails unless every engine instance and namespace of d
// belongs to a live sandbox or a noted pool instance, and no note names
// a sandbox.
func (d *dend) checkNoStrays(known ...string) {
	d.t.Helper()
	list, err := d.c.ListSandboxes(ctxT(d.t, 30*time.Second))
	if err != nil {
		d.t.Fatal(err)
	}
	owners := map[string]bool{}
	for _, sb := range list {
		owners[sb.ID] = true
		if _, noted := d.warmNotes()[sb.ID]; noted {
			d.t.Errorf("sandbox %s is still noted as a warm instance", sb.Name)
		}
	}
	for id := range d.warmNotes() {
		owners[id] = true
	}
	for _, inst := range d.instances() {
		id, _, _ := strings.Cut(inst, "-g")
		if !owners[id] {
			d.t.Errorf("engine instance %s belongs to nothing", inst)
		}
	}
	for _, ns := range d.namespacePaths() {
		id := ns[strings.LastIndexByte(ns, '-')+1:]
		if (slices.Contains(known, id) || strings.Contains(d.logs(), id)) && !owners[id] {
			d.t.Errorf("namespace %s belongs to nothing", ns)
		}
	}
	for _, v := range d.sandboxVolumes() {
		if !owners[v] {
			d.t.Errorf("volume sandboxes/%s belongs to nothing", v)
		}
	}
}

// sandboxVolumes names the volumes under the pool's sandboxes/: names
// that start with "." are never volumes (dend keeps the den-init it
// copies into roots there, internal/runsc/initroot.go).
func (d *dend) sandboxVolumes() []string {
	ents, _ := os.ReadDir(filepath.Join(d.dataDir, "pool", "sandboxes"))
	var vols []string
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), ".") {
			vols = append(vols, e.Name())
		}
	}
	return vols
}

// A dend killed with pools up, or in the middle of claims, comes back
// clean: what the pools left is removed, claims that had a record are
// settled with it, and the pools refill. Under memory pressure they give
// everything back and say why; bad input changes nothing.
func TestWarmPoolCrashPressureAndBadInput(t *testing.T) {
	d := startDend(t)
	d.buildBusybox()
	d.setWarm("busybox", 2)
	d.waitWarm("busybox", 2)
	left := d.warmNotes()

	d.kill()
	d.start()
	d.waitWarm("busybox", 2) // the target outlives dend
	for id := range left {
		if _, still := d.warmNotes()[id]; still {
			t.Errorf("warm instance %s of the killed dend is still noted", id)
		}
		if _, err := os.Stat(denns.Path(denns.Dir(d.runDir), netip.MustParsePrefix(d.subnet), id)); err == nil {
			t.Errorf("namespace of warm instance %s is left", id)
		}
	}
	d.checkNoStrays(slices.Collect(maps.Keys(left))...)

	// Killed while claims are under way.
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d.c.CreateSandbox(ctxT(t, time.Minute), api.CreateSandboxRequest{Name: fmt.Sprintf("mid-%d", i), Image: "busybox", Memory: "256M"})
		}()
	}
	waitFor(t, 30*time.Second, "a create to be recorded", func() bool {
		l, err := d.c.ListSandboxes(ctxT(t, 10*time.Second))
		return err == nil && len(l) > 0
	})
	before := d.warmNotes()
	d.kill()
	wg.Wait()
	d.start()
	d.waitWarm("busybox", 2)
	var known []string
	for id := range before {
		known = append(known, id)
	}
	d.checkNoStrays(known...)
	list, _ := d.c.ListSandboxes(ctxT(t, 10*time.Second))
	for _, sb := range list {
		if sb.State != "running" {
			t.Errorf("%s is %s after the restart", sb.Name, sb.State)
		} else {
			d.mustSh(sb.Name, "true")
		}
	}

	// Bad input answers clearly and changes nothing.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"image", "warm", "nope", "3"}, `image "nope" not found`},
		{[]string{"image", "warm", "busybox", "-3"}, "cannot be negative"},
		{[]string{"image", "warm", "busybox", "1000"}, "invalid warm count 1000"},
		{[]string{"image", "warm", "busybox", "two"}, "not a whole number"},
	} {
		_, stderr, code := d.den(c.args...)
		if code == 0 || !strings.Contains(stderr, c.want) {
			t.Errorf("den %v: exit %d, stderr %q; want a refusal saying %q", c.args, code, stderr, c.want)
		}
	}
	if _, err := d.c.SetWarm(ctxT(t, 10*time.Second), "busybox", api.SetWarmRequest{Count: -1}); err == nil {
		t.Error("a negative count was accepted through the API")
	}
	if p := d.warmPool("busybox"); p.Target != 2 {
		t.Errorf("refused input changed the pool: %+v", p)
	}

	// Memory pressure: a reserve above what the host has.
	d.stop()
	d.args = append(d.args, "--warm-reserve", "100T")
	d.start()
	waitFor(t, 30*time.Second, "the pool to be held back", func() bool {
		p := d.warmPool("busybox")
		return p.Ready == 0 && strings.Contains(p.Held, "host memory low")
	})
	h, err := d.c.Health(ctxT(t, 10*time.Second))
	if err != nil || h.Warm == nil || !h.Warm.Pressure || h.Warm.Instances != 0 {
		t.Errorf("health under pressure: %+v, %v", h.Warm, err)
	}
	_, stderr, code := d.den("image", "warm", "busybox", "3")
	if code == 0 || !strings.Contains(stderr, "host memory") {
		t.Errorf("a count beyond memory: exit %d, %q", code, stderr)
	}
	if out := d.mustDen("", "top"); !strings.Contains(out, "LOW") {
		t.Errorf("den top under pressure:\n%s", out)
	}
}

// In a fleet each node keeps its own pools: a pool instance is in no
// record, so no node lists it and only its own node's creates claim it.
func TestWarmPoolsPerNode(t *testing.T) {
	_, file := pgStoreFile(t)
	a, _ := startNode(t, "node-a", file)
	b, _ := startNode(t, "node-b", file)
	onNode := func(n string) func(*api.CreateSandboxRequest) {
		return func(r *api.CreateSandboxRequest) { r.Node = n }
	}
	b.create("first-b", onNode("node-b")) // busybox on both nodes before any pool
	a.create("first-a", onNode("node-a"))
	a.setWarm("busybox", 2)
	a.waitWarm("busybox", 2)

	if p := b.warmPool("busybox"); p != nil && (p.Target != 0 || p.Ready != 0) {
		t.Errorf("node-b shows node-a's pool as its own: %+v", p)
	}
	for _, d := range []*dend{a, b} {
		list, err := d.c.ListSandboxes(ctxT(t, 30*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for _, sb := range list {
			if _, pooled := a.warmNotes()[sb.ID]; pooled {
				t.Errorf("a node lists warm instance %s as a sandbox", sb.ID)
			}
		}
		if len(list) != 2 {
			t.Errorf("%d sandboxes listed, want the 2 made", len(list))
		}
	}
	a.create("wa", onNode("node-a"))
	b.create("wb", onNode("node-b"))
	if !a.claimedFromPool("wa") || b.claimedFromPool("wb") {
		t.Errorf("claimed: wa %v (want true), wb %v (want false: node-b keeps no pool)", a.claimedFromPool("wa"), b.claimedFromPool("wb"))
	}
	if got := b.mustSh("wa", "hostname"); got != "wa\n" {
		t.Errorf("the claimed sandbox, through node-b: hostname %q", got)
	}
	a.waitWarm("busybox", 2)
}
