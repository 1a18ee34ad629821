package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/den-dev/den/api"
)

// install runs `make install-files` (what `make install` does after
// building) from the repository with the binaries under test and the
// make variables given.
func install(t *testing.T, vars ...string) {
	t.Helper()
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("make", append([]string{"-s", "-C", repo, "install-files", "BIN=" + binDir}, vars...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make install-files %v: %v\n%s", vars, err, out)
	}
}

// make install as a package would stage it, and its unit checked by
// systemd-analyze. This host has no systemd running (the test neither
// enables nor starts the unit): what is checked is that systemd would
// accept the unit, not that dend comes up at boot.
func TestServiceInstall(t *testing.T) {
	// Staged under DESTDIR: the paths inside name the real places.
	dest := t.TempDir()
	install(t, "DESTDIR="+dest)
	for _, f := range []string{"usr/local/bin/dend", "usr/local/bin/den", "usr/local/lib/den/den-init", "usr/local/lib/den/runsc"} {
		if fi, err := os.Stat(filepath.Join(dest, f)); err != nil || fi.Mode()&0o111 == 0 {
			t.Errorf("%s not installed executable: %v", f, err)
		}
	}
	unit := readFile(t, filepath.Join(dest, "etc/systemd/system/dend.service"))
	for _, want := range []string{"ExecStart=/usr/local/bin/dend $DEND_FLAGS", "EnvironmentFile=-/etc/den/dend.env",
		"KillMode=process", "WantedBy=multi-user.target"} {
		if !strings.Contains(unit, want) {
			t.Errorf("unit lacks %q:\n%s", want, unit)
		}
	}
	envFile := filepath.Join(dest, "etc/den/dend.env")
	if env := readFile(t, envFile); !strings.Contains(env, "DEN_RUNSC=/usr/local/lib/den/runsc") || !strings.Contains(env, "DEN_INIT=/usr/local/lib/den/den-init") {
		t.Errorf("dend.env:\n%s", env)
	}
	if fi, _ := os.Stat(envFile); fi.Mode().Perm() != 0o600 {
		t.Errorf("dend.env mode %v, want 0600 (it may hold a DSN)", fi.Mode().Perm())
	}
	// An operator's settings survive the next install.
	if err := os.WriteFile(envFile, []byte("DEN_LISTEN=127.0.0.1:7070\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	install(t, "DESTDIR="+dest)
	if env := readFile(t, envFile); env != "DEN_LISTEN=127.0.0.1:7070\n" {
		t.Errorf("a second install changed dend.env:\n%s", env)
	}
	if !strings.Contains(readFile(t, filepath.Join(dest, "usr/local/share/bash-completion/completions/den")), "__start_den") {
		t.Error("no bash completion installed")
	}

	// systemd-analyze verify checks the binaries a unit names exist, so
	// the unit it checks is installed under a prefix of its own, where
	// they do. It exits 0 on mere warnings: any output fails the test.
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Fatal("systemd-analyze not installed: run scripts/test-setup.sh (Debian's systemd package)")
	}
	root := t.TempDir()
	install(t, "PREFIX="+root+"/usr/local", "SYSCONFDIR="+root+"/etc")
	unitPath := filepath.Join(root, "etc/systemd/system/dend.service")
	if out, err := exec.Command(analyze, "verify", unitPath).CombinedOutput(); err != nil || len(out) > 0 {
		t.Errorf("systemd-analyze verify dend.service: %v\n%s", err, out)
	}
	// The check is not blind: a bad kill mode is reported.
	broken := strings.Replace(readFile(t, unitPath), "KillMode=process", "KillMode=sometimes", 1)
	if err := os.WriteFile(unitPath, []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, _ := exec.Command(analyze, "verify", unitPath).CombinedOutput(); !strings.Contains(string(out), "kill mode") {
		t.Errorf("systemd-analyze accepted a unit with KillMode=sometimes: %s", out)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// den and dend from one build agree: den version says both, no warning.
func TestServiceVersion(t *testing.T) {
	d := startDend(t)
	out, errs, code := d.den("version")
	lines := strings.Split(out, "\n")
	if code != 0 || errs != "" || len(lines) < 2 {
		t.Fatalf("den version: %d %q %q", code, out, errs)
	}
	den, dend := strings.Fields(lines[0]), strings.Fields(lines[1])
	if len(den) < 2 || len(dend) < 2 || den[1] != dend[1] {
		t.Errorf("den and dend of one build differ:\n%s", out)
	}
}

// dend run as the installed unit says, the way systemd runs it: the
// unit's ExecStart with $DEND_FLAGS split on blanks, in the environment
// of its EnvironmentFile (which names the installed runsc and den-init),
// plus settings an operator puts in that file.
func startUnit(t *testing.T, root string, settings map[string]string) *dend {
	t.Helper()
	unit := readFile(t, filepath.Join(root, "etc/systemd/system/dend.service"))
	var execStart, envFile string
	for line := range strings.Lines(unit) {
		line = strings.TrimSpace(line)
		if v, ok := strings.CutPrefix(line, "ExecStart="); ok {
			execStart = v
		}
		if v, ok := strings.CutPrefix(line, "EnvironmentFile="); ok {
			envFile = strings.TrimPrefix(v, "-") // "-": may be missing
		}
	}
	if execStart == "" || envFile == "" {
		t.Fatalf("the unit has no ExecStart or EnvironmentFile:\n%s", unit)
	}
	f, err := os.OpenFile(envFile, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range settings {
		fmt.Fprintf(f, "%s=%s\n", k, v)
	}
	f.Close()
	env := map[string]string{}
	var envList []string
	for line := range strings.Lines(readFile(t, envFile)) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("%s: not KEY=VALUE: %q", envFile, line)
		}
		v = strings.Trim(v, `"`)
		env[k] = v
		envList = append(envList, k+"="+v)
	}
	argv := strings.Fields(execStart)
	var args []string
	for _, a := range argv[1:] {
		if name, ok := strings.CutPrefix(a, "$"); ok {
			args = append(args, strings.Fields(env[name])...)
			continue
		}
		args = append(args, a)
	}
	d := &dend{t: t, dataDir: env["DEN_DATA_DIR"], runDir: env["DEN_RUN_DIR"], socket: env["DEN_SOCKET"], subnet: env["DEN_SUBNET"],
		args: args, bin: argv[0], env: envList}
	d.open()
	return d
}

// The installed service across `systemctl restart dend` (KillMode=process:
// dend alone ends) and across a reboot (every process ends): a restart
// keeps every sandbox running with its processes; after the reboot the
// dend the unit starts finds each as den promises. A running sandbox is
// stopped with its files (den start boots it), a hibernated one stays
// hibernated and wakes with its processes on use. What is not tried here:
// systemd itself starting the unit at boot, as this host does not run
// systemd; systemd-analyze accepts the unit (TestServiceInstall).
func TestServiceRestartAndReboot(t *testing.T) {
	root := t.TempDir()
	base := t.TempDir()
	t.Cleanup(func() { unmountUnder(t, base) })
	install(t, "PREFIX="+root+"/usr/local", "SYSCONFDIR="+root+"/etc")
	unit := readFile(t, filepath.Join(root, "etc/systemd/system/dend.service"))
	if !strings.Contains(unit, "KillMode=process") {
		t.Fatalf("the unit does not end dend alone:\n%s", unit)
	}
	d := startUnit(t, root, map[string]string{
		"DEN_DATA_DIR": filepath.Join(base, "data"), "DEN_RUN_DIR": filepath.Join(base, "run"),
		"DEN_SOCKET": filepath.Join(base, "den.sock"), "DEN_SUBNET": testSubnet(),
		"DEND_FLAGS": `"--pool-size 8G --stop-grace 2s --dns-upstream 127.0.0.1:9"`,
	})
	d.create("worker")
	d.create("sleeper")
	counter := "i=0; while true; do i=$((i+1)); echo $i > /root/count; sleep 0.2; done"
	ctx := ctxT(t, 3*time.Minute)
	for _, name := range []string{"worker", "sleeper"} {
		d.mustSh(name, "echo kept > /root/proof && sync")
		if _, err := d.c.ExecDetached(ctx, name, api.ExecRequest{Argv: []string{"sh", "-c", counter}}); err != nil {
			t.Fatal(err)
		}
	}
	count := func(name string) int {
		n, _ := strconv.Atoi(strings.TrimSpace(d.mustSh(name, "cat /root/count")))
		return n
	}
	waitFor(t, 20*time.Second, "the counters", func() bool { return count("worker") > 0 && count("sleeper") > 0 })
	if _, err := d.c.Hibernate(ctx, "sleeper"); err != nil {
		t.Fatal(err)
	}
	gen := d.inspect("worker").Generation
	// The engines are the installed runsc, as the env file says.
	runsc := filepath.Join(root, "usr/local/lib/den/runsc")
	engines := 0
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), d.runscRoot()) {
			engines++
			if exe, _ := os.Readlink(filepath.Join(filepath.Dir(p), "exe")); exe != runsc {
				t.Errorf("an engine runs %s, not the installed %s", exe, runsc)
			}
		}
	}
	if engines == 0 {
		t.Fatal("no engine of this dend found")
	}

	// systemctl restart dend: SIGTERM to dend, then the unit again.
	d.stop()
	d.start()
	if sb := d.inspect("worker"); sb.State != api.StateRunning || sb.Generation != gen {
		t.Fatalf("after a restart: worker %s generation %d, want running %d", sb.State, sb.Generation, gen)
	}
	before := count("worker")
	waitFor(t, 10*time.Second, "worker's counter to go on after the restart", func() bool { return count("worker") > before })

	// A reboot: every process of dend and its engines ends at once.
	d.kill()
	killRunsc(t, d)
	d.start()
	if sb := d.inspect("worker"); sb.State != api.StateStopped || !strings.Contains(sb.Reason, "lost") {
		t.Fatalf("after the reboot: worker %s %q, want stopped with the reason", sb.State, sb.Reason)
	}
	if sb := d.inspect("sleeper"); sb.State != api.StateHibernated {
		t.Fatalf("after the reboot: sleeper %s, want hibernated", sb.State)
	}
	// The hibernated one wakes on use, its counter going on from where
	// it was; the stopped one starts, its files kept.
	at := count("sleeper")
	waitFor(t, 10*time.Second, "sleeper's counter to go on after the reboot", func() bool { return count("sleeper") > at })
	if at == 0 {
		t.Errorf("sleeper's counter restarted from 0")
	}
	if _, err := d.c.StartSandbox(ctx, "worker"); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"worker", "sleeper"} {
		if got := d.mustSh(name, "cat /root/proof"); got != "kept\n" {
			t.Errorf("%s's file after the reboot: %q", name, got)
		}
	}
}
