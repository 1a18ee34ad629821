package integration

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
	denns "github.com/den-dev/den/internal/netns"
)

// mountHolder starts a process in a private mount namespace of the
// test's, which outlives the dends the test runs in it (nsenter), and
// returns its pid. What is mounted there is seen nowhere else, and goes
// when the test ends and the namespace with it.
func mountHolder(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", "sleep", "infinity")
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting a mount namespace: %v", err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	ours, _ := os.Readlink("/proc/self/ns/mnt")
	pid := cmd.Process.Pid
	waitFor(t, 10*time.Second, "the mount namespace", func() bool {
		ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", pid))
		return err == nil && ns != ours
	})
	return pid
}

// inMountNS runs a shell script in the mount namespace of pid.
func inMountNS(t *testing.T, pid int, script string) {
	t.Helper()
	out, err := exec.Command("nsenter", "-m", "-t", strconv.Itoa(pid), "sh", "-euc", script).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v: %s", script, err, out)
	}
}

// mountPoints lists the mount points in pid's mount namespace, hidden
// ones too, that are dir or under it.
func mountPoints(pid int, dir string) []string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", pid))
	var got []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
			got = append(got, f[4])
		}
	}
	return got
}

// networkLeftovers lists what of d's network is on the host, seen from
// pid's mount namespace: its nftables table, its resolver's address on
// lo, its links and namespaces, and its namespaces' mounts (in its run
// directory, and any of its in /run/netns).
func (d *dend) networkLeftovers(pid int) []string {
	p := netip.MustParsePrefix(d.subnet)
	var left []string
	table := "den-" + strings.ReplaceAll(p.String(), "/", "-")
	if exec.Command("nft", "list", "table", "inet", table).Run() == nil {
		left = append(left, "nftables table "+table)
	}
	addrs, _ := netlink.AddrList(nil, netlink.FAMILY_V4)
	for _, a := range addrs {
		if ip, ok := netip.AddrFromSlice(a.IP); ok && p.Contains(ip.Unmap()) {
			left = append(left, "address "+a.IPNet.String())
		}
	}
	links, _ := netlink.LinkList()
	for _, l := range links {
		if strings.HasPrefix(l.Attrs().Name, denns.LinkName(p, "")) {
			left = append(left, "link "+l.Attrs().Name)
		}
	}
	for _, ns := range d.namespacePaths() {
		left = append(left, "namespace "+ns)
	}
	left = append(left, mountPoints(pid, denns.Dir(d.runDir))...)
	legacy := denns.Path("/run/netns", p, "")
	for _, m := range mountPoints(pid, "/run/netns") {
		if strings.HasPrefix(m, legacy) {
			left = append(left, m)
		}
	}
	return left
}

// Another tool's first `ip netns` add bind-mounts /run/netns onto itself
// (recursively, then makes it shared), which hides every namespace
// mounted there before. This test does what iproute2 does, without ip,
// in a mount namespace of its own where its dend runs, so that nothing
// else on the host sees it; with a sandbox an older dend left with its
// namespace in /run/netns. Then hibernate and wake, remove and create
// all work, the namespaces of removed sandboxes go (hidden ones too), the
// other tool's namespace stays, and a dend stopped with no sandbox left
// leaves no network of its own behind.
func TestNetnsAddOfOtherToolsIsHarmless(t *testing.T) {
	if _, err := os.Stat("/run/netns"); os.IsNotExist(err) {
		t.Cleanup(func() { os.Remove("/run/netns") }) // last, if left empty
	}
	holder := mountHolder(t)
	d := newDend(t)
	d.wrap = []string{"nsenter", "-m", "-t", strconv.Itoa(holder), "--"}
	d.open()
	ctx := ctxT(t, 10*time.Minute)
	p := netip.MustParsePrefix(d.subnet)

	sleeper := d.create("sleeper")
	d.mustSh("sleeper", "echo kept > /root/f")
	doomed := d.create("doomed")
	old := d.create("old")

	// "old" as a dend from before this change left it: its namespace
	// mounted in /run/netns. (A dend that keeps it there already has.)
	// Stopped, dend keeps what its running sandboxes need.
	d.stop()
	kept := strings.Join(d.networkLeftovers(holder), "\n") + "\n"
	for _, sb := range []*api.Sandbox{sleeper, doomed, old} {
		if !strings.Contains(kept, "link "+denns.LinkName(p, sb.ID)+"\n") || !strings.Contains(kept, sb.ID+"\n") {
			t.Errorf("a dend stopped with sandbox %s running took its link or namespace away: %s", sb.Name, kept)
		}
	}
	if !strings.Contains(kept, "nftables table") || !strings.Contains(kept, "address") {
		t.Errorf("a dend stopped with sandboxes running took its table or its resolver's address away: %s", kept)
	}
	cur := denns.Path(denns.Dir(d.runDir), p, old.ID)
	legacy := denns.Path("/run/netns", p, old.ID)
	t.Cleanup(func() { os.Remove(legacy) }) // the file, if the test stopped halfway
	if _, err := os.Stat(cur); err == nil {
		inMountNS(t, holder, fmt.Sprintf("mkdir -p /run/netns; touch %[2]s; mount --bind %[1]s %[2]s; umount %[1]s; rm %[1]s", cur, legacy))
	}

	// What iproute2's `ip netns` add of "tool" does the first time, and the namespace it
	// adds (the host's own, as `ip netns attach tool 1` would).
	tool := "/run/netns/dentest-tool-" + strconv.Itoa(os.Getpid())
	t.Cleanup(func() { os.Remove(tool) })
	inMountNS(t, holder, "mkdir -p /run/netns; mount --rbind /run/netns /run/netns; mount --make-rshared /run/netns; "+
		"touch "+tool+"; mount --bind /proc/self/ns/net "+tool)
	t.Cleanup(func() {
		// The namespace goes with the holder; unmount what the test
		// mounted all the same, in the order it was mounted in.
		exec.Command("nsenter", "-m", "-t", strconv.Itoa(holder), "sh", "-c", "umount "+tool+"; umount -l /run/netns").Run()
	})

	d.start()
	for _, name := range []string{"sleeper", "old"} {
		if _, err := d.c.Hibernate(ctx, name); err != nil {
			t.Errorf("hibernating %s: %v", name, err)
			continue
		}
		if sb, err := d.c.Resume(ctx, name); err != nil || sb.State != api.StateRunning {
			t.Errorf("waking %s: %v", name, err)
		} else if name == "sleeper" {
			if got := d.mustSh("sleeper", "cat /root/f"); got != "kept\n" {
				t.Errorf("sleeper's file after the wake: %q", got)
			}
		}
	}
	if err := d.c.RemoveSandbox(ctx, "doomed", true); err != nil {
		t.Errorf("removing doomed: %v", err)
	}
	fresh := d.create("fresh")
	d.mustSh("fresh", "true")
	list, err := d.c.ListSandboxes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, sb := range list {
		if sb.State != api.StateRunning {
			t.Errorf("sandbox %s is %s: %s", sb.Name, sb.State, sb.Reason)
		}
	}

	// Each sandbox has its namespace, in the run directory, and only
	// there; the removed one's is gone, hidden or not.
	dir := denns.Dir(d.runDir)
	var want []string
	for _, sb := range []*api.Sandbox{sleeper, old, fresh} {
		want = append(want, denns.Path(dir, p, sb.ID))
	}
	slices.Sort(want)
	if got := d.namespacePaths(); !slices.Equal(got, want) {
		t.Errorf("namespaces %q, want %q", got, want)
	}
	mounts := mountPoints(holder, dir)
	slices.Sort(mounts)
	if want = append([]string{dir}, want...); !slices.Equal(mounts, want) {
		t.Errorf("mounts in the run directory %q, want %q", mounts, want)
	}
	for _, m := range mountPoints(holder, "/run/netns") {
		if strings.HasPrefix(m, denns.Path("/run/netns", p, "")) {
			t.Errorf("a namespace of den's is still mounted in /run/netns: %s", m)
		}
	}
	if !slices.Contains(mountPoints(holder, "/run/netns"), tool) {
		t.Errorf("the other tool's namespace %s is gone", tool)
	}

	// A dend stopped with no sandbox left leaves no network behind.
	for _, name := range []string{"sleeper", "old", "fresh"} {
		if err := d.c.RemoveSandbox(ctx, name, true); err != nil {
			t.Errorf("removing %s: %v", name, err)
		}
	}
	d.stop()
	if left := d.networkLeftovers(holder); len(left) > 0 {
		t.Errorf("a stopped dend with no sandbox left behind: %q", left)
	}
	if _, err := os.Stat(filepath.Join(d.dataDir)); err != nil {
		t.Errorf("its data directory: %v", err)
	}
}

// Start, exec's wake, restore and peer add --restart all attach the
// sandbox's network anew, removing what an earlier attach left. When a
// namespace cannot be removed (here a directory where the namespace of
// a sandbox of an older dend would be), they fail, and answer why: not
// "internal error". Once it can be removed, they work.
func TestNamespaceNotRemovedAnswersWhy(t *testing.T) {
	d := startDend(t)
	ctx := ctxT(t, 10*time.Minute)
	sb := d.create("stuck")
	d.create("other")
	if _, err := d.c.Checkpoint(ctx, "stuck", client.CheckpointOptions{Name: "c1"}); err != nil {
		t.Fatal(err)
	}
	blocker := "/run/netns/den-" + sb.ID
	t.Cleanup(func() { os.RemoveAll(blocker) })
	block := func() {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(blocker, "in-the-way"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	unblock := func() {
		t.Helper()
		if err := os.RemoveAll(blocker); err != nil {
			t.Fatal(err)
		}
	}
	check := func(what string, err error) {
		t.Helper()
		var apiErr *api.Error
		switch {
		case err == nil:
			t.Errorf("%s with a namespace that cannot be removed: no error", what)
		case !errors.As(err, &apiErr) || apiErr.Code != api.CodeUnavailable ||
			!strings.Contains(apiErr.Message, "network namespace cannot be removed") || apiErr.Hint == "":
			t.Errorf("%s with a namespace that cannot be removed: %v (%#v); want unavailable, saying why, with a hint", what, err, apiErr)
		}
	}

	if _, err := d.c.StopSandbox(ctx, "stuck"); err != nil {
		t.Fatal(err)
	}
	block()
	_, err := d.c.StartSandbox(ctx, "stuck")
	check("start", err)
	got, gerr := d.c.GetSandbox(ctx, "stuck")
	if gerr != nil || !strings.Contains(got.Reason, "network namespace cannot be removed") {
		t.Errorf("the sandbox's recorded reason: %v %+v", gerr, got)
	}
	unblock()
	if _, err := d.c.StartSandbox(ctx, "stuck"); err != nil {
		t.Fatalf("start once the namespace can go: %v", err)
	}

	if _, err := d.c.Hibernate(ctx, "stuck"); err != nil {
		t.Fatal(err)
	}
	block()
	_, err = d.c.Exec(ctx, "stuck", api.ExecRequest{Argv: []string{"true"}}, client.ExecIO{})
	check("exec waking the sandbox", err)
	_, err = d.c.Restore(ctx, "stuck", "c1")
	check("restore", err)
	unblock()
	if _, err := d.c.Restore(ctx, "stuck", "c1"); err != nil {
		t.Fatalf("restore once the namespace can go: %v", err)
	}
	d.mustSh("stuck", "true")

	// Running: the stop before the boot cannot remove it either.
	block()
	_, err = d.c.AddPeer(ctx, "stuck", api.AddPeerRequest{Sandbox: "other", Restart: true})
	check("peer add --restart", err)
}
