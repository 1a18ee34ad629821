package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
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
