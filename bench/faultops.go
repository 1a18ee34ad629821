package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

// maxSandboxes is how many sandboxes the run keeps at most: the machine
// it runs on is small.
const maxSandboxes = 7

// opWeights are the operations and faults a step draws from, with their
// weights.
var opWeights = []struct {
	name   string
	weight int
}{
	{"create", 8}, {"write", 30}, {"pause", 4}, {"resume", 4}, {"hibernate", 5}, {"wake", 4}, {"start", 4},
	{"checkpoint", 6}, {"fork", 3}, {"restore", 4}, {"move", 5}, {"rm", 3},
	{"kill-dend", 4}, {"kill-engine", 4}, {"pg-restart", 2}, {"pg-outage", 1}, {"minio-kill", 2},
	{"node-crash", 1}, {"node-lost", 1},
}

// step draws one operation or fault and does it.
func (f *faultRun) step(ctx context.Context, i int) {
	total := 0
	for _, w := range opWeights {
		total += w.weight
	}
	r := f.rng.Intn(total)
	op := ""
	for _, w := range opWeights {
		if r -= w.weight; r < 0 {
			op = w.name
			break
		}
	}
	if f.live() < 3 && !strings.HasPrefix(op, "kill") && !strings.Contains(op, "-") {
		op = "create" // too few sandboxes to do much with
	}
	fmt.Fprintf(os.Stderr, "faults: #%d %s %s\n", i, f.since(time.Now()), op)
	switch op {
	case "create":
		if f.live() >= maxSandboxes {
			f.write(ctx)
			return
		}
		f.create(ctx)
	case "write":
		f.write(ctx)
	case "pause", "resume", "hibernate", "start", "wake", "checkpoint", "restore", "fork", "move", "rm":
		f.sandboxOp(ctx, op)
	case "kill-dend":
		f.killDend()
	case "kill-engine":
		f.killEngine(ctx)
	case "pg-restart", "pg-outage":
		f.pgFault(op == "pg-outage")
	case "minio-kill":
		f.minioFault()
	case "node-crash":
		f.nodeCrash()
	case "node-lost":
		f.nodeLost(ctx)
	}
}

// live counts the sandboxes that exist, as far as the run knows.
func (f *faultRun) live() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, m := range f.sbs {
		if !m.gone {
			n++
		}
	}
	return n
}

// pick draws a sandbox that exists, or nil.
func (f *faultRun) pick() *sbModel {
	f.mu.Lock()
	defer f.mu.Unlock()
	var names []string
	for _, k := range sortedKeys(f.sbs) {
		if m := f.sbs[k]; !m.gone && !m.maybe && !m.maybeGone {
			names = append(names, k)
		}
	}
	if len(names) == 0 {
		return nil
	}
	return f.sbs[names[f.rng.Intn(len(names))]]
}

// nodeFor draws the dend a call about m goes through: any fleet node that
// is up (a call reaches a sandbox through any node), or the single one.
func (f *faultRun) nodeFor(m *sbModel) *fnode {
	candidates := f.fleet
	if m != nil && m.single {
		candidates = []*fnode{f.single}
	}
	// A call to a dend that is down only says so: wait, up to a minute,
	// for one to be up.
	var up []*fnode
	for wait := 0; wait < 600; wait++ {
		up = up[:0]
		for _, n := range candidates {
			if n.isUp() {
				up = append(up, n)
			}
		}
		if len(up) > 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(up) == 0 {
		up = candidates
	}
	return up[f.rng.Intn(len(up))]
}

// call runs one API call with the run's deadline and records its outcome.
func (f *faultRun) call(op, sb string, n *fnode, fn func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), f.o.deadline)
	defer cancel()
	start := time.Now()
	err := fn(ctx)
	late := ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded)
	f.mu.Lock()
	c := f.ops[op]
	if c == nil {
		c = &counts{}
		f.ops[op] = c
	}
	switch {
	case late:
		c.late++
	case err != nil:
		c.failed++
		if f.errs[op] == nil {
			f.errs[op] = map[string]int{}
		}
		f.errs[op][shorten(err.Error())]++
	default:
		c.ok++
	}
	f.mu.Unlock()
	if late {
		f.defect("late", "%s of %s through %s, started at %s, passed its %s deadline: %v",
			op, sb, n.name, f.since(start), f.o.deadline, err)
	}
	return err
}

// shorten keeps an error's first line, its ids blurred so that alike
// errors count together.
func shorten(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 220 {
		s = s[:220] + "…"
	}
	return s
}

// heartbeat starts a detached loop in sandbox m writing the time to
// /root/hb every second, so that a copy running where it should not be
// shows on its node's disk.
func (f *faultRun) heartbeat(n *fnode, m *sbModel) {
	f.call("heartbeat", m.name, n, func(ctx context.Context) error {
		_, err := n.c.ExecDetached(ctx, m.name, api.ExecRequest{Argv: []string{"sh", "-c",
			"while :; do date +%s > /root/hb; sleep 1; done"}})
		return err
	})
}

func (f *faultRun) create(ctx context.Context) {
	f.mu.Lock()
	f.seq++
	name := fmt.Sprintf("s%d", f.seq)
	single := f.single != nil && f.rng.Intn(4) == 0
	f.mu.Unlock()
	m := &sbModel{name: name, single: single}
	n := f.nodeFor(m)
	req := api.CreateSandboxRequest{Name: name, Image: "busybox", Memory: "128M", Disk: "256M",
		Policy: &api.Policy{PauseAfter: new("0"), HibernateAfter: new("0"), TTL: new("0")}}
	if !single {
		req.Node = f.fleet[f.rng.Intn(len(f.fleet))].name
	}
	err := f.call("create", name, n, func(ctx context.Context) error {
		_, err := n.c.CreateSandbox(ctx, req)
		return err
	})
	m.maybe = err != nil
	f.mu.Lock()
	f.sbs[name] = m
	f.mu.Unlock()
	if err == nil {
		f.heartbeat(n, m)
	}
}

func (f *faultRun) write(ctx context.Context) {
	m := f.pick()
	if m == nil {
		f.create(ctx)
		return
	}
	n := f.nodeFor(m)
	f.mu.Lock()
	f.seq++
	key := fmt.Sprintf("w%d", f.seq)
	f.mu.Unlock()
	err := f.call("write", m.name, n, func(ctx context.Context) error {
		run, err := n.c.Exec(ctx, m.name, api.ExecRequest{Argv: []string{"sh", "-c",
			"mkdir -p /root/w && echo " + key + " > /root/w/" + key}}, client.ExecIO{})
		if err != nil {
			return err
		}
		if run.ExitCode == nil || *run.ExitCode != 0 {
			return fmt.Errorf("the write ended %s", run.Status)
		}
		return nil
	})
	if err == nil {
		f.mu.Lock()
		m.writes = append(m.writes, key)
		f.acked++
		f.mu.Unlock()
	}
}

// noteHead records the writes a checkpoint the run has not seen yet
// holds: the sandbox's newest checkpoint, made by the call that answered
// sb (a hibernation, a move), holds every write acknowledged before it.
func (f *faultRun) noteHead(m *sbModel, ids ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, id := range ids {
		if id == "" {
			continue
		}
		if _, ok := f.ckWrites[id]; !ok {
			f.ckWrites[id] = append([]string(nil), m.writes...)
			m.ckpts = append(m.ckpts, id)
		}
	}
}

func (f *faultRun) sandboxOp(ctx context.Context, op string) {
	m := f.pick()
	if m == nil {
		f.create(ctx)
		return
	}
	n := f.nodeFor(m)
	var sb *api.Sandbox
	sbCall := func(fn func(context.Context) (*api.Sandbox, error)) error {
		return f.call(op, m.name, n, func(ctx context.Context) (err error) {
			sb, err = fn(ctx)
			return err
		})
	}
	switch op {
	case "pause":
		sbCall(func(ctx context.Context) (*api.Sandbox, error) { return n.c.Pause(ctx, m.name) })
	case "resume":
		sbCall(func(ctx context.Context) (*api.Sandbox, error) { return n.c.Resume(ctx, m.name) })
	case "hibernate":
		if sbCall(func(ctx context.Context) (*api.Sandbox, error) { return n.c.Hibernate(ctx, m.name) }) == nil {
			f.noteHead(m, sb.Checkpoint, sb.Head)
		}
	case "start":
		if sbCall(func(ctx context.Context) (*api.Sandbox, error) { return n.c.StartSandbox(ctx, m.name) }) == nil {
			f.heartbeat(n, m)
		}
	case "wake":
		f.call(op, m.name, n, func(ctx context.Context) error {
			_, err := n.c.Exec(ctx, m.name, api.ExecRequest{Argv: []string{"true"}}, client.ExecIO{})
			return err
		})
	case "checkpoint":
		var ck *api.Checkpoint
		err := f.call(op, m.name, n, func(ctx context.Context) (err error) {
			ck, err = n.c.Checkpoint(ctx, m.name, client.CheckpointOptions{})
			return err
		})
		if err == nil {
			f.noteHead(m, ck.ID)
		}
	case "restore":
		f.mu.Lock()
		if len(m.ckpts) == 0 {
			f.mu.Unlock()
			f.sandboxOp(ctx, "checkpoint")
			return
		}
		ck := m.ckpts[f.rng.Intn(len(m.ckpts))]
		f.mu.Unlock()
		err := sbCall(func(ctx context.Context) (*api.Sandbox, error) { return n.c.Restore(ctx, m.name, ck) })
		f.rolledBack(m, ck, err == nil)
	case "fork":
		if f.live() >= maxSandboxes {
			f.write(ctx)
			return
		}
		f.mu.Lock()
		f.seq++
		child := &sbModel{name: fmt.Sprintf("s%d", f.seq), single: m.single, writes: append([]string(nil), m.writes...)}
		f.sbs[child.name] = child
		f.mu.Unlock()
		var kids []api.Sandbox
		err := f.call(op, m.name, n, func(ctx context.Context) (err error) {
			kids, err = n.c.Fork(ctx, m.name, client.ForkOptions{Name: child.name})
			return err
		})
		f.mu.Lock()
		child.maybe = err != nil
		f.mu.Unlock()
		if err == nil && len(kids) == 1 {
			f.noteHead(m, kids[0].Origin)
			f.heartbeat(n, child)
		}
	case "move":
		if m.single {
			f.write(ctx)
			return
		}
		cur := f.inspect(m, n)
		if cur == nil {
			return
		}
		var targets []string
		for _, t := range f.fleet {
			if t.name != cur.Node {
				targets = append(targets, t.name)
			}
		}
		to := targets[f.rng.Intn(len(targets))]
		if sbCall(func(ctx context.Context) (*api.Sandbox, error) { return n.c.MoveSandbox(ctx, m.name, to, false) }) == nil {
			f.noteHead(m, sb.Checkpoint, sb.Head)
		}
	case "rm":
		err := f.call(op, m.name, n, func(ctx context.Context) error { return n.c.RemoveSandbox(ctx, m.name, true) })
		f.mu.Lock()
		if err == nil {
			m.gone = true
		} else {
			m.maybeGone = true
		}
		f.mu.Unlock()
	}
}

// rolledBack changes what m must hold after it went back to checkpoint
// ck: only what ck holds. When the call's answer was lost, it went back
// or not, so only what both hold.
func (f *faultRun) rolledBack(m *sbModel, ck string, done bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	held, known := f.ckWrites[ck]
	if !known {
		fmt.Fprintf(os.Stderr, "faults: %s went back to checkpoint %s, which the run did not see made: its writes are not checked from here\n", m.name, ck)
		m.writes = nil
		return
	}
	if done {
		m.writes = append([]string(nil), held...)
		return
	}
	in := map[string]bool{}
	for _, w := range held {
		in[w] = true
	}
	var both []string
	for _, w := range m.writes {
		if in[w] {
			both = append(both, w)
		}
	}
	m.writes = both
}

// drawDelay draws a duration between lo and hi.
func (f *faultRun) drawDelay(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(f.rng.Int63n(int64(hi-lo)+1))
}

// killDend kills a dend with SIGKILL soon, while the next operations run,
// and starts it again a little later (within its lease, mostly).
func (f *faultRun) killDend() {
	f.downAndBack("kill-dend", false, 1500*time.Millisecond, 300*time.Millisecond, 3*time.Second)
}

// inspect asks n for sandbox m, counted as an operation; nil when the
// call failed.
func (f *faultRun) inspect(m *sbModel, n *fnode) *api.Sandbox {
	var sb *api.Sandbox
	if f.call("inspect", m.name, n, func(ctx context.Context) (err error) {
		sb, err = n.c.GetSandbox(ctx, m.name)
		return err
	}) != nil {
		return nil
	}
	return sb
}

// killEngine kills every host process of a sandbox's engine instance
// soon, as kill -9 or the OOM killer would.
func (f *faultRun) killEngine(ctx context.Context) {
	m := f.pick()
	if m == nil {
		return
	}
	n := f.nodeFor(m)
	sb := f.inspect(m, n)
	if sb == nil {
		return
	}
	f.count("kill-engine")
	wait := f.drawDelay(0, time.Second)
	f.bg.Add(1)
	go func() {
		defer f.bg.Done()
		time.Sleep(wait)
		for _, node := range f.nodes() {
			for inst, pids := range node.engines() {
				if id, _ := sandboxOf(inst); id == sb.ID {
					for _, p := range pids {
						syscall.Kill(p, syscall.SIGKILL)
					}
				}
			}
		}
	}()
}

// pgFault stops PostgreSQL and starts it again: a restart (fast shutdown,
// under a second and a half down) or an outage longer than the lease
// (its postmaster killed, as a crash does). One at a time.
func (f *faultRun) pgFault(long bool) {
	down := f.drawDelay(200*time.Millisecond, 1500*time.Millisecond)
	stop := f.pg.Halt
	name := "pg-restart"
	if long {
		down, stop, name = f.drawDelay(f.o.lease*3/2, f.o.lease*5/2), f.pg.Kill, "pg-outage"
	}
	f.mu.Lock()
	if len(f.pgDown) > 0 && f.pgDown[len(f.pgDown)-1].to.IsZero() {
		f.mu.Unlock()
		return
	}
	f.pgDown = append(f.pgDown, outage{from: time.Now()})
	o := &f.pgDown[len(f.pgDown)-1]
	f.faults[name]++
	f.mu.Unlock()
	f.bg.Add(1)
	go func() {
		defer f.bg.Done()
		stop()
		time.Sleep(down)
		for f.pg.Resume(context.Background()) != nil {
			time.Sleep(time.Second)
		}
		f.mu.Lock()
		o.to = time.Now()
		f.mu.Unlock()
	}()
}

// minioFault kills MinIO and starts it again after a few seconds.
func (f *faultRun) minioFault() {
	down := f.drawDelay(time.Second, 8*time.Second)
	f.mu.Lock()
	busy := f.faults["minio-busy"] > 0
	if !busy {
		f.faults["minio-busy"]++
		f.faults["minio-kill"]++
	}
	f.mu.Unlock()
	if busy {
		return
	}
	f.bg.Add(1)
	go func() {
		defer f.bg.Done()
		f.minio.Kill()
		time.Sleep(down)
		for f.minio.Restart(context.Background()) != nil {
			time.Sleep(time.Second)
		}
		f.mu.Lock()
		f.faults["minio-busy"]--
		f.mu.Unlock()
	}()
}

// killNode kills a node's dend and every engine it ran, as a power loss
// of that host does.
func (f *faultRun) killNode(n *fnode, engines bool) {
	n.kill(syscall.SIGKILL)
	if !engines {
		return
	}
	for _, pids := range n.engines() {
		for _, p := range pids {
			syscall.Kill(p, syscall.SIGKILL)
		}
	}
}

// nodeCrash takes a node down, dend and engines, and brings it back
// within its lease.
func (f *faultRun) nodeCrash() {
	f.downAndBack("node-crash", true, 0, 200*time.Millisecond, 2*time.Second)
}

// downAndBack kills a random node's dend (and its engines too when
// engines is set: a power loss) after up to maxWait, while the next
// operations run, and starts it again after between downMin and downMax.
func (f *faultRun) downAndBack(fault string, engines bool, maxWait, downMin, downMax time.Duration) {
	nodes := f.nodes()
	n := nodes[f.rng.Intn(len(nodes))]
	if !n.isUp() {
		return
	}
	f.count(fault)
	var wait time.Duration
	if maxWait > 0 {
		wait = f.drawDelay(0, maxWait)
	}
	down := f.drawDelay(downMin, downMax)
	f.bg.Add(1)
	go func() {
		defer f.bg.Done()
		time.Sleep(wait)
		f.killNode(n, engines)
		time.Sleep(down)
		f.restart(n)
	}()
}
