package main

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

// check restarts every dend cleanly, then checks states, leftovers and
// writes; then removes every sandbox, stops every dend cleanly and checks
// that nothing but their data directories is left.
func (f *faultRun) check(ctx context.Context) {
	for _, n := range f.nodes() {
		n.kill(syscall.SIGTERM)
		f.restart(n)
	}
	time.Sleep(3 * time.Second)
	records := f.records()
	for _, n := range f.nodes() {
		f.checkNode(n, records)
	}
	f.checkWrites(records)

	// Everything removed, every dend stopped: nothing may be left.
	for _, n := range f.nodes() {
		for _, sb := range records[n] {
			if sb.Node == n.name || !n.fleet {
				f.call("final-rm", sb.Name, n, func(ctx context.Context) error { return n.c.RemoveSandbox(ctx, sb.Name, true) })
			}
		}
	}
	for _, n := range f.nodes() {
		n.kill(syscall.SIGTERM)
	}
	for _, n := range f.nodes() {
		f.checkStopped(n)
	}
}

// records are every sandbox's record, by the dend that keeps it (a fleet
// shares one list).
func (f *faultRun) records() map[*fnode][]api.Sandbox {
	out := map[*fnode][]api.Sandbox{}
	var fleet []api.Sandbox
	f.call("list", "", f.fleet[0], func(ctx context.Context) (err error) {
		fleet, err = f.fleet[0].c.ListSandboxes(ctx)
		return err
	})
	for _, n := range f.fleet {
		out[n] = fleet
	}
	if f.single != nil {
		var l []api.Sandbox
		f.call("list", "", f.single, func(ctx context.Context) (err error) {
			l, err = f.single.c.ListSandboxes(ctx)
			return err
		})
		out[f.single] = l
	}
	return out
}

// onNode are the records of sandboxes on node n, by id.
func onNode(n *fnode, all []api.Sandbox) map[string]api.Sandbox {
	out := map[string]api.Sandbox{}
	for _, sb := range all {
		if !n.fleet || sb.Node == n.name {
			out[sb.ID] = sb
		}
	}
	return out
}

// checkNode compares node n's records with what runs on it, and looks for
// what no record owns: engine instances, links, namespaces, firewall
// rules, volumes and mounts.
func (f *faultRun) checkNode(n *fnode, records map[*fnode][]api.Sandbox) {
	mine := onNode(n, records[n])
	anywhere := map[string]api.Sandbox{}
	for _, l := range records {
		for _, sb := range l {
			anywhere[sb.ID] = sb
		}
	}
	engines := n.engines()
	for inst := range engines {
		id, gen := sandboxOf(inst)
		sb, ok := mine[id]
		switch {
		case !ok && anywhere[id].ID == "":
			f.defect("leftover", "node %s runs engine instance %s of a sandbox no record names", n.name, inst)
		case !ok:
			f.defect("wrong", "node %s runs engine instance %s of %s, whose record says %s on node %s",
				n.name, inst, anywhere[id].Name, anywhere[id].State, anywhere[id].Node)
		case sb.State != api.StateRunning && sb.State != api.StatePaused:
			f.defect("wrong", "node %s runs engine instance %s of %s, recorded %s (%s)", n.name, inst, sb.Name, sb.State, sb.Reason)
		case gen != sb.Generation:
			f.defect("wrong", "node %s runs engine instance %s of %s, whose record is at generation %d", n.name, inst, sb.Name, sb.Generation)
		}
	}
	for id, sb := range mine {
		inst := fmt.Sprintf("%s-g%d", id, sb.Generation)
		if sb.Pending != "" || sb.State == api.StateCreating {
			f.defect("wrong", "%s is still %s (pending %q) after the run settled", sb.Name, sb.State, sb.Pending)
		}
		switch sb.State {
		case api.StateRunning, api.StatePaused:
			if _, ok := engines[inst]; !ok {
				f.defect("wrong", "%s is recorded %s on node %s, but no engine instance %s runs there", sb.Name, sb.State, n.name, inst)
			} else if st := f.engineStatus(n, inst); st != sb.State {
				f.defect("wrong", "%s is recorded %s, but its engine instance %s on node %s is %s", sb.Name, sb.State, inst, n.name, st)
			}
		case api.StateError:
			f.defect("wrong", "%s is in error after the run settled: %s", sb.Name, sb.Reason)
		}
	}
	owned := func(id string) bool {
		for sid := range mine {
			if sid == id || (len(id) == 12 && strings.HasPrefix(sid, id)) {
				return true
			}
		}
		return false
	}
	for _, l := range links(n.tag) {
		if id := strings.TrimPrefix(l, "d"+n.tag); !owned(id) {
			f.defect("leftover", "node %s has link %s of a sandbox not on it", n.name, l)
		}
	}
	for _, ns := range namespaces(n.tag) {
		if !owned(ns.id) {
			f.defect("leftover", "node %s has network namespace %s of a sandbox not on it", n.name, ns.where)
		}
	}
	for _, l := range firewallLinks(n) {
		if id := strings.TrimPrefix(l, "d"+n.tag); !owned(id) {
			f.defect("leftover", "node %s's nftables table names link %s of a sandbox not on it", n.name, l)
		}
	}
	for _, v := range volumes(n) {
		if id, ok := strings.CutPrefix(v, "sandboxes/"); ok && !owned(id) {
			f.defect("leftover", "node %s keeps volume %s of a sandbox not on it", n.name, v)
		}
	}
	for _, mnt := range mountsUnder(n.dataDir, n.runDir) {
		// dend's own while it runs: the pool, its namespace directory's
		// private mount, and the empty namespace runsc pins for gofers.
		if mnt.path == filepath.Join(n.dataDir, "pool") || mnt.path == filepath.Join(n.runDir, "netns") ||
			mnt.path == filepath.Join(n.runDir, "runsc", "null-netns") {
			continue
		}
		if id := nsID(n.tag, mnt.path); id != "" && owned(id) {
			continue
		}
		f.defect("leftover", "node %s has a mount at %s (%s) no sandbox on it owns", n.name, mnt.path, mnt.fstype)
	}
}

// engineStatus asks runsc what an instance is doing: running or paused.
func (f *faultRun) engineStatus(n *fnode, inst string) string {
	out, err := exec.Command(filepath.Join(f.bin, "runsc"), "--root", filepath.Join(n.runDir, "runsc"), "state", inst).Output()
	if err != nil {
		return "unknown (runsc state: " + err.Error() + ")"
	}
	m := regexp.MustCompile(`"status":\s*"(\w+)"`).FindSubmatch(out)
	if m == nil {
		return "unknown"
	}
	return string(m[1])
}

// checkWrites reads every sandbox's files and counts the acknowledged
// writes missing.
func (f *faultRun) checkWrites(records map[*fnode][]api.Sandbox) {
	byName := map[string]api.Sandbox{}
	for _, l := range records {
		for _, sb := range l {
			byName[sb.Name] = sb
		}
	}
	for _, name := range sortedKeys(f.sbs) {
		m := f.sbs[name]
		sb, ok := byName[name]
		switch {
		case !ok && (m.gone || m.maybeGone || m.maybe):
			continue
		case ok && m.gone:
			f.defect("wrong", "%s was removed (the call succeeded) but has a record: %s", name, sb.State)
			continue
		case !ok:
			f.defect("wrong", "%s has no record any more, though nothing removed it", name)
			for _, w := range m.writes {
				f.defect("lost", "%s's write %s: the sandbox is gone", name, w)
			}
			continue
		}
		n := f.fleet[0]
		if m.single {
			n = f.single
		}
		got, err := f.readWrites(n, sb)
		if err != nil {
			for _, w := range m.writes {
				f.defect("lost", "%s's write %s cannot be read: %v", name, w, err)
			}
			continue
		}
		f.mu.Lock()
		m.maybe, m.maybeGone = false, false
		f.mu.Unlock()
		for _, w := range m.writes {
			if !got[w] {
				f.defect("lost", "%s's acknowledged write %s is not there (%d of its %d expected writes there)",
					name, w, countIn(m.writes, got), len(m.writes))
			}
		}
	}
}

func countIn(ws []string, got map[string]bool) int {
	k := 0
	for _, w := range ws {
		if got[w] {
			k++
		}
	}
	return k
}

// readWrites wakes or starts sandbox sb as needed and reads its writes.
func (f *faultRun) readWrites(n *fnode, sb api.Sandbox) (map[string]bool, error) {
	if sb.State == api.StateError {
		return nil, fmt.Errorf("it is in error: %s", sb.Reason)
	}
	if sb.State == api.StateStopped {
		if err := f.call("final-start", sb.Name, n, func(ctx context.Context) error {
			_, err := n.c.StartSandbox(ctx, sb.Name)
			return err
		}); err != nil {
			return nil, fmt.Errorf("starting it: %w", err)
		}
	}
	var out bytes.Buffer
	err := f.call("final-read", sb.Name, n, func(ctx context.Context) error {
		run, err := n.c.Exec(ctx, sb.Name, api.ExecRequest{Argv: []string{"sh", "-c", "cat /root/w/* 2>/dev/null; true"}},
			client.ExecIO{Stdout: &out})
		if err == nil && (run.ExitCode == nil || *run.ExitCode != 0) {
			err = fmt.Errorf("reading ended %s", run.Status)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	got := map[string]bool{}
	for _, w := range strings.Fields(out.String()) {
		got[w] = true
	}
	return got, nil
}

// checkStopped looks at a node whose dend stopped cleanly with no
// sandboxes left: nothing but its data directory may remain.
func (f *faultRun) checkStopped(n *fnode) {
	for inst := range n.engines() {
		f.defect("leftover", "after a clean stop with no sandboxes, node %s still runs engine instance %s", n.name, inst)
	}
	for _, l := range links(n.tag) {
		f.defect("leftover", "after a clean stop with no sandboxes, node %s left link %s", n.name, l)
	}
	for _, ns := range namespaces(n.tag) {
		f.defect("leftover", "after a clean stop with no sandboxes, node %s left network namespace %s", n.name, ns.where)
	}
	if out, err := exec.Command("nft", "list", "table", "inet", tableName(n.subnet)).CombinedOutput(); err == nil {
		f.defect("leftover", "after a clean stop, node %s left its nftables table %s (%d lines)", n.name, tableName(n.subnet), bytes.Count(out, []byte("\n")))
	}
	if a := resolverAddr(n.subnet); hostHasAddr(a) {
		f.defect("leftover", "after a clean stop, node %s left its resolver's address %s on the host", n.name, a)
	}
	for _, v := range volumes(n) {
		if !strings.HasPrefix(v, "images/") {
			f.defect("leftover", "after every sandbox was removed, node %s keeps volume %s", n.name, v)
		}
	}
	for _, mnt := range mountsUnder(n.dataDir, n.runDir) {
		if mnt.path != filepath.Join(n.dataDir, "pool") {
			f.defect("leftover", "after a clean stop, node %s left a mount at %s (%s)", n.name, mnt.path, mnt.fstype)
		}
	}
}

// links are the host's links with tag's prefix.
func links(tag string) []string {
	out, _ := exec.Command("ip", "-o", "link", "show").Output()
	var ls []string
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
		if strings.HasPrefix(name, "d"+tag) {
			ls = append(ls, name)
		}
	}
	return ls
}

// nsRef is a network namespace of den's: a file in /run/netns or an nsfs
// mount anywhere (a hidden one too).
type nsRef struct{ id, where string }

func namespaces(tag string) []nsRef {
	byID := map[string][]string{}
	for _, r := range namespaceRefs(tag) {
		byID[r.id] = append(byID[r.id], r.where)
	}
	var out []nsRef
	for _, id := range sortedKeys(byID) {
		out = append(out, nsRef{id, strings.Join(byID[id], ", ")})
	}
	return out
}

// namespaceRefs are the files and mounts of tag's namespaces, each.
func namespaceRefs(tag string) []nsRef {
	var out []nsRef
	ents, _ := os.ReadDir("/run/netns")
	for _, e := range ents {
		if id, ok := strings.CutPrefix(e.Name(), "den-"+tag+"-"); ok {
			out = append(out, nsRef{id, "/run/netns/" + e.Name() + " (file)"})
		}
	}
	for _, m := range mounts() {
		if m.fstype == "nsfs" {
			if id := nsID(tag, m.path); id != "" {
				out = append(out, nsRef{id, m.path + " (mount " + m.mid + ")"})
			}
		}
	}
	return out
}

// nsID is the sandbox id in a namespace path of tag's, or "".
func nsID(tag, path string) string {
	id, ok := strings.CutPrefix(filepath.Base(path), "den-"+tag+"-")
	if !ok {
		return ""
	}
	return id
}

type mountRef struct{ mid, path, fstype string }

func mounts() []mountRef {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	var out []mountRef
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 10 {
			continue
		}
		fstype := ""
		for i, x := range f {
			if x == "-" && i+1 < len(f) {
				fstype = f[i+1]
			}
		}
		out = append(out, mountRef{mid: f[0], path: f[4], fstype: fstype})
	}
	return out
}

func mountsUnder(dirs ...string) []mountRef {
	var out []mountRef
	for _, m := range mounts() {
		for _, d := range dirs {
			if m.path == d || strings.HasPrefix(m.path, d+"/") {
				out = append(out, m)
			}
		}
	}
	return out
}

// firewallLinks are the links of tag's that node n's nftables table names.
func firewallLinks(n *fnode) []string {
	out, err := exec.Command("nft", "list", "table", "inet", tableName(n.subnet)).Output()
	if err != nil {
		return nil
	}
	seen := map[string]bool{}
	for _, m := range regexp.MustCompile(`"?(d`+regexp.QuoteMeta(n.tag)+`[a-z0-9]+)"?`).FindAllStringSubmatch(string(out), -1) {
		seen[m[1]] = true
	}
	return sortedKeys(seen)
}

func tableName(p netip.Prefix) string { return "den-" + strings.ReplaceAll(p.String(), "/", "-") }

// resolverAddr is den's resolver's address in range p: the host end of
// its last /30.
func resolverAddr(p netip.Prefix) netip.Addr {
	a := p.Addr().As4()
	size := uint32(1) << (32 - p.Bits())
	v := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
	v += size - 4 + 1
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

func hostHasAddr(a netip.Addr) bool {
	out, _ := exec.Command("ip", "-o", "addr", "show").Output()
	return regexp.MustCompile(`inet ` + regexp.QuoteMeta(a.String()) + `/`).Match(out)
}

// volumes are the btrfs subvolumes in node n's pool, by path.
func volumes(n *fnode) []string {
	pool := filepath.Join(n.dataDir, "pool")
	out, err := exec.Command("btrfs", "subvolume", "list", "-o", pool).Output()
	if err != nil {
		out, _ = exec.Command("btrfs", "subvolume", "list", pool).Output()
	}
	var vs []string
	for _, line := range strings.Split(string(out), "\n") {
		if _, p, ok := strings.Cut(line, " path "); ok {
			vs = append(vs, strings.TrimSpace(p))
		}
	}
	return vs
}

// scrub removes, after the checks, what node n left on the host beyond
// this run's mount namespace, so that the machine stays as it was.
func (f *faultRun) scrub(n *fnode) {
	for _, l := range links(n.tag) {
		exec.Command("ip", "link", "del", l).Run()
	}
	for try := 0; try < 5; try++ { // mounts may be stacked
		for _, m := range mounts() {
			if m.fstype == "nsfs" && nsID(n.tag, m.path) != "" {
				syscall.Unmount(m.path, syscall.MNT_DETACH)
			}
		}
	}
	ents, _ := os.ReadDir("/run/netns")
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "den-"+n.tag+"-") {
			os.Remove(filepath.Join("/run/netns", e.Name()))
		}
	}
	exec.Command("nft", "delete", "table", "inet", tableName(n.subnet)).Run()
	if a := resolverAddr(n.subnet); hostHasAddr(a) {
		exec.Command("ip", "addr", "del", a.String()+"/32", "dev", "lo").Run()
	}
}

// report prints the figures and every defect.
func (f *faultRun) report() {
	f.mu.Lock()
	defer f.mu.Unlock()
	fmt.Printf("fault run: seed %d, %d operations, %d fleet nodes%s, lease %s, call deadline %s, %s\n",
		f.o.seed, f.o.ops, len(f.fleet), map[bool]string{true: " and a single-host dend", false: ""}[f.single != nil],
		f.o.lease, f.o.deadline, time.Since(f.started).Round(time.Second))
	fmt.Println("\noperations (ok / failed / past deadline):")
	for _, k := range sortedKeys(f.ops) {
		c := f.ops[k]
		fmt.Printf("  %-12s %4d / %4d / %d\n", k, c.ok, c.failed, c.late)
	}
	fmt.Println("\nfaults:")
	for _, k := range sortedKeys(f.faults) {
		if k != "minio-busy" {
			fmt.Printf("  %-12s %d\n", k, f.faults[k])
		}
	}
	fmt.Println("\nerrors the calls got (not defects by themselves):")
	for _, op := range sortedKeys(f.errs) {
		texts := sortedKeys(f.errs[op])
		sort.SliceStable(texts, func(i, j int) bool { return f.errs[op][texts[i]] > f.errs[op][texts[j]] })
		for _, t := range texts {
			fmt.Printf("  %-12s %3d× %s\n", op, f.errs[op][t], t)
		}
	}
	if len(f.exits) > 0 {
		fmt.Println("\ndends that exited by themselves (each started again a second later):")
		for _, e := range f.exits {
			fmt.Println("  " + strings.ReplaceAll(e, "\n", "\n  "))
		}
	}
	exitDefects := f.exitDefects()
	fmt.Printf("\nacknowledged writes %d, lost %d; calls past their deadline %d; wrong states %d; leftovers %d; dend exits within the lease %d\n",
		f.acked, f.lost, f.late, f.wrong, f.leftover, len(exitDefects))
	if len(f.defects)+len(exitDefects) > 0 {
		fmt.Println("\ndefects:")
		for _, d := range f.defects {
			fmt.Println("  " + strings.ReplaceAll(d, "\n", "\n  "))
		}
		for _, e := range exitDefects {
			fmt.Println("  [exit] " + strings.ReplaceAll(e, "\n", "\n  "))
		}
	}
	fmt.Printf("\nseed %d (go run ./bench -only faults -ops %d -seed %d draws the same operations; faults land where timing puts them)\n",
		f.o.seed, f.o.ops, f.o.seed)
}
