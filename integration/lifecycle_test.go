package integration

import (
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
	denns "github.com/den-dev/den/internal/netns"
)

// Files written in a sandbox survive stop/start, and each boot is a new
// generation recorded in the history.
func TestPersistenceAcrossStopStart(t *testing.T) {
	d := startDend(t)
	sb := d.create("keep")
	if sb.State != api.StateRunning || sb.Generation != 1 {
		t.Fatalf("new sandbox: state %s generation %d, want running 1", sb.State, sb.Generation)
	}
	d.mustSh("keep", "mkdir -p /work && echo hello > /work/note && echo more >> /work/note")

	ctx := ctxT(t, time.Minute)
	stopped, err := d.c.StopSandbox(ctx, "keep")
	if err != nil {
		t.Fatal(err)
	}
	if stopped.State != api.StateStopped {
		t.Fatalf("after stop: %s", stopped.State)
	}
	if got := d.instances(); len(got) != 0 {
		t.Fatalf("a stopped sandbox still has engine instances: %v", got)
	}
	if _, err := d.c.ExecDetached(ctx, "keep", api.ExecRequest{Argv: []string{"true"}}); !client.IsConflict(err) {
		t.Fatalf("exec on a stopped sandbox: got %v, want a conflict", err)
	}

	started, err := d.c.StartSandbox(ctx, "keep")
	if err != nil {
		t.Fatal(err)
	}
	if started.Generation != 2 {
		t.Fatalf("generation after restart = %d, want 2", started.Generation)
	}
	if got := d.mustSh("keep", "cat /work/note"); got != "hello\nmore\n" {
		t.Fatalf("file after stop/start = %q", got)
	}
	events, err := d.c.Events(ctx, "keep")
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, e := range events {
		types = append(types, e.Type)
	}
	want := "created started stopping stopped booting started"
	if got := strings.Join(types, " "); got != want {
		t.Fatalf("history = %q, want %q", got, want)
	}
}

// Restarting dend kills no sandbox: it reattaches, and a background run
// started before the restart keeps producing output that is all readable.
func TestDendRestartReattaches(t *testing.T) {
	d := startDend(t)
	d.create("live")
	ctx := ctxT(t, 2*time.Minute)
	run, err := d.c.ExecDetached(ctx, "live", api.ExecRequest{Argv: []string{"sh", "-c",
		"i=0; while [ $i -lt 40 ]; do echo line $i; i=$((i+1)); sleep 0.05; done; echo done >&2"}})
	if err != nil {
		t.Fatal(err)
	}
	before := d.instances()
	d.stop()
	// The instance outlives dend.
	if got := d.instances(); len(got) != 1 || got[0] != before[0] {
		t.Fatalf("instances after dend stopped: %v, before %v", got, before)
	}
	time.Sleep(300 * time.Millisecond) // let the command write while dend is away
	d.start()

	sb, err := d.c.GetSandbox(ctx, "live")
	if err != nil {
		t.Fatal(err)
	}
	if sb.State != api.StateRunning || sb.Generation != 1 {
		t.Fatalf("after dend restart: %s gen %d, want running gen 1", sb.State, sb.Generation)
	}
	out := readLogs(t, d, "live", run.ID, "stdout", 0, true)
	var want strings.Builder
	for i := 0; i < 40; i++ {
		want.WriteString("line " + strconv.Itoa(i) + "\n")
	}
	if out != want.String() {
		t.Fatalf("output across restart:\n%q\nwant\n%q", out, want.String())
	}
	if got := readLogs(t, d, "live", run.ID, "stderr", 0, true); got != "done\n" {
		t.Fatalf("stderr = %q", got)
	}
	final, err := d.c.GetRun(ctx, "live", run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if final.Status != api.RunExited || final.ExitCode == nil || *final.ExitCode != 0 {
		t.Fatalf("final run: %+v", final)
	}
	if final.StdoutSize != int64(want.Len()) {
		t.Fatalf("recorded stdout size %d, want %d", final.StdoutSize, want.Len())
	}
	// Reading from an offset gives the rest exactly.
	if got := readLogs(t, d, "live", run.ID, "stdout", 7, false); got != want.String()[7:] {
		t.Fatalf("from offset 7: %q", got)
	}
	// And it is still a working sandbox.
	if got := d.mustSh("live", "echo ok"); got != "ok\n" {
		t.Fatalf("exec after reattach: %q", got)
	}
}

// A dend told to stop while it starts (systemd's stop during a start, an
// operator's second thought) settles nothing it stopped asking about: a
// running sandbox whose den-init had not answered yet is neither
// destroyed nor recorded lost, and the next dend takes it over with its
// processes. The engine is frozen (SIGSTOP) so that den-init cannot
// answer while the starting dend asks it, and thawed after that dend
// stopped.
func TestStopWhileStartingKeepsSandboxes(t *testing.T) {
	d := startDend(t)
	d.create("keep")
	d.mustSh("keep", "(n=0; while :; do n=$((n+1)); echo $n > /root/n; sleep 0.2; done) >/dev/null 2>&1 & echo $! > /root/pid")
	pid := d.mustSh("keep", "cat /root/pid")
	insts := d.instances()
	if len(insts) != 1 {
		t.Fatalf("instances: %v, want one", insts)
	}
	engine := d.enginePid(insts[0])
	d.stop()

	thaw := freeze(t, engine)
	defer thaw()
	d.launch()
	waitFor(t, time.Minute, "dend to begin settling the sandbox", func() bool {
		return strings.Contains(d.logs(), "settling the sandboxes recorded on this node")
	})
	time.Sleep(2 * time.Second) // well inside the 20 s dend waits for den-init
	d.stop()
	if logs := d.logs(); !strings.Contains(logs, "leaving a sandbox unsettled: dend is stopping") {
		t.Fatalf("the stopped dend did not say it left the sandbox for the next one:\n%s", logs)
	}
	if got := d.instances(); len(got) != 1 || got[0] != insts[0] {
		t.Fatalf("instances after a stop while starting: %v, want %v", got, insts)
	}
	thaw()
	d.start()

	sb, err := d.c.GetSandbox(ctxT(t, 10*time.Second), "keep")
	if err != nil {
		t.Fatal(err)
	}
	if sb.State != api.StateRunning || sb.Generation != 1 {
		t.Fatalf("after a stop while starting and a start: %s generation %d (%s), want running generation 1", sb.State, sb.Generation, sb.Reason)
	}
	n1 := d.mustSh("keep", "cat /root/n")
	time.Sleep(time.Second)
	if got := d.mustSh("keep", "cat /root/pid; kill -0 $(cat /root/pid) && echo alive"); got != pid+"alive\n" {
		t.Fatalf("the counter after the restarts: %q, want pid %q alive", got, pid)
	}
	if n2 := d.mustSh("keep", "cat /root/n"); n2 == n1 {
		t.Fatalf("the counter stopped at %s", strings.TrimSpace(n1))
	}
}

// A host "reboot" (kill -9 of dend and every runsc process) leaves the
// sandbox stopped with its files and the reason in its history; start
// brings it back as a new generation with the files.
func TestSimulatedRebootKeepsFiles(t *testing.T) {
	d := startDend(t)
	d.create("phoenix")
	d.mustSh("phoenix", "echo survived > /root/proof && sync")

	d.kill()
	killRunsc(t, d)
	d.start()

	ctx := ctxT(t, time.Minute)
	sb, err := d.c.GetSandbox(ctx, "phoenix")
	if err != nil {
		t.Fatal(err)
	}
	if sb.State != api.StateStopped || !strings.Contains(sb.Reason, "lost") {
		t.Fatalf("after reboot: state %s reason %q, want stopped with a reason", sb.State, sb.Reason)
	}
	if got := d.instances(); len(got) != 0 {
		t.Fatalf("engine instances left after recovery: %v", got)
	}
	if _, err := d.c.StartSandbox(ctx, "phoenix"); err != nil {
		t.Fatal(err)
	}
	if got := d.mustSh("phoenix", "cat /root/proof"); got != "survived\n" {
		t.Fatalf("file after reboot = %q", got)
	}
}

// killRunsc kills -9 every runsc process that belongs to this dend.
func killRunsc(t *testing.T, d *dend) {
	t.Helper()
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	killed := 0
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || !strings.Contains(string(b), d.runscRoot()) {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p))); err == nil {
			syscall.Kill(pid, syscall.SIGKILL)
			killed++
		}
	}
	if killed == 0 {
		t.Fatalf("found no runsc process of this dend to kill")
	}
	waitFor(t, 10*time.Second, "runsc processes to die", func() bool {
		out, _ := exec.Command("pgrep", "-f", d.runscRoot()).Output()
		return len(strings.TrimSpace(string(out))) == 0
	})
}

// Remove takes everything away: instance, namespace, volume, name.
func TestRemoveLeavesNothing(t *testing.T) {
	d := startDend(t)
	sb := d.create("gone")
	nsPath := denns.Path(denns.Dir(d.runDir), netip.MustParsePrefix(d.subnet), sb.ID)
	if _, err := os.Stat(nsPath); err != nil {
		t.Fatalf("the running sandbox's namespace: %v", err)
	}
	ctx := ctxT(t, time.Minute)
	if err := d.c.RemoveSandbox(ctx, "gone", false); !client.IsConflict(err) {
		t.Fatalf("rm of a running sandbox without force: %v, want conflict", err)
	}
	if err := d.c.RemoveSandbox(ctx, "gone", true); err != nil {
		t.Fatal(err)
	}
	if _, err := d.c.GetSandbox(ctx, "gone"); !client.IsNotFound(err) {
		t.Fatalf("get after rm: %v", err)
	}
	if got := d.instances(); len(got) != 0 {
		t.Fatalf("instances after rm: %v", got)
	}
	if _, err := os.Stat(nsPath); !os.IsNotExist(err) {
		t.Fatalf("namespace left after rm: %v", err)
	}
	if _, err := os.Stat(filepath.Join(d.dataDir, "pool", "sandboxes", sb.ID)); !os.IsNotExist(err) {
		t.Fatalf("volume left after rm: %v", err)
	}
	// The name is free again.
	d.create("gone")
}

// On a host without btrfs, the copy driver gives the same persistence.
func TestCopyStorageDriver(t *testing.T) {
	d := startDend(t, "--storage", "copy")
	ctx := ctxT(t, time.Minute)
	h, err := d.c.Health(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if h.Storage != "copy" {
		t.Fatalf("storage %q, want copy", h.Storage)
	}
	d.create("plain")
	d.mustSh("plain", "echo kept > /root/f")
	if _, err := d.c.StopSandbox(ctx, "plain"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.c.StartSandbox(ctx, "plain"); err != nil {
		t.Fatal(err)
	}
	if got := d.mustSh("plain", "cat /root/f"); got != "kept\n" {
		t.Fatalf("after stop/start on the copy driver: %q", got)
	}
	// A second sandbox from the same image does not see the first's file.
	d.create("other")
	if out, _, code := d.sh("other", "cat /root/f"); code == 0 {
		t.Fatalf("a sibling sandbox sees the first's file: %q", out)
	}
}
