package integration

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// python is the interpreter the Python SDK's tests run under: Debian's,
// with Debian's pytest (scripts/test-setup.sh installs it).
const python = "/usr/bin/python3"

// The Python SDK's own tests (sdk/python/tests, pytest) against a real
// dend: once over TCP as an owner token, once over the unix socket as
// root. Every test must run: the environment gives them what they need,
// and DEN_TEST_STRICT turns a skip into a failure.
func TestPythonSDK(t *testing.T) {
	if out, err := exec.Command(python, "-m", "pytest", "--version").CombinedOutput(); err != nil {
		t.Fatalf("%s has no pytest (%v: %s): run `make test`, whose scripts/test-setup.sh installs python3-pytest", python, err, out)
	}
	addr := freeAddr(t)
	d := startDend(t, "--listen", addr)
	token := func(args ...string) string {
		return strings.TrimSpace(d.mustDen("", append([]string{"token", "create"}, args...)...))
	}
	alice := token("py-alice", "--scope", "owner")
	bob := token("py-bob", "--scope", "owner")
	revoked := token("py-revoked", "--scope", "owner")
	d.mustDen("", "token", "revoke", "py-revoked")
	expired := token("py-expired", "--scope", "owner", "--expires", "1s")
	waitFor(t, 15*time.Second, "the 1s token to expire", func() bool {
		_, errs, code := d.denAs([]string{"DEN_HOST=http://" + addr, "DEN_TOKEN=" + expired}, "", "ls")
		return code != 0 && strings.Contains(errs, "expired")
	})

	common := []string{
		"DEN_TEST_STRICT=1",
		"DEN_TEST_TCP=http://" + addr,
		"DEN_TEST_OWNER_TOKENS=" + alice + "," + bob,
		"DEN_TEST_REVOKED_TOKEN=" + revoked,
		"DEN_TEST_EXPIRED_TOKEN=" + expired,
		"DEN_TEST_CLI=" + filepath.Join(binDir, "den"),
	}
	t.Run("tcp-owner", func(t *testing.T) {
		pytest(t, append(common, "DEN_HOST=http://"+addr, "DEN_TOKEN="+alice))
	})
	t.Run("socket-admin", func(t *testing.T) {
		pytest(t, append(common, "DEN_SOCKET="+d.socket))
	})
}

// pytest runs the Python SDK's tests with env and fails the test on any
// exit but 0 (pytest exits 5 when it collected nothing: that fails too).
func pytest(t *testing.T, env []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfEs", "sdk/python/tests")
	cmd.Dir = ".."
	cmd.Env = append(cleanEnv(), append([]string{"PYTHONDONTWRITEBYTECODE=1"}, env...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	summary := lastLine(out.String())
	if err != nil {
		t.Fatalf("pytest: %v after %s\n%s", err, time.Since(start).Round(time.Millisecond), out.String())
	}
	if !strings.Contains(summary, " passed") || strings.Contains(summary, "skipped") {
		t.Fatalf("pytest passed, but: %q\n%s", summary, out.String())
	}
	t.Logf("pytest: %s", summary)
}

// cleanEnv is this process's environment without the variables that
// point den's clients somewhere.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k == "DEN_HOST" || k == "DEN_TOKEN" || k == "DEN_SOCKET" || strings.HasPrefix(k, "DEN_TEST_") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
