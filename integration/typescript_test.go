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

// The TypeScript SDK's own tests (sdk/ts/test, node:test) run against a
// real dend: once on its unix socket as root, once over TCP with an owner
// token.
func TestTypeScriptSDK(t *testing.T) {
	addr := freeAddr(t)
	d := startDend(t, "--listen", addr)
	owner := strings.TrimSpace(d.mustDen("", "token", "create", "ts", "--scope", "owner"))
	for _, run := range []struct {
		name string
		env  []string
	}{
		{"socket", []string{"DEN_SOCKET=" + d.socket}},
		{"tcp", []string{"DEN_HOST=http://" + addr, "DEN_TOKEN=" + owner}},
	} {
		t.Run(run.name, func(t *testing.T) { npmTest(t, run.env) })
	}
}

// npmTest builds sdk/ts and runs its tests with env, failing on any failure.
func npmTest(t *testing.T, env []string) {
	t.Helper()
	dir, err := filepath.Abs("../sdk/ts")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "undici")); err != nil {
		t.Fatalf("the TypeScript SDK's packages are not installed: run `npm ci` in %s (make test does)", dir)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "test", "--silent")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	t.Logf("npm test:\n%s", tail(out.String(), 3000))
	if err != nil {
		t.Fatalf("npm test: %v", err)
	}
	// node:test prints a summary; a run that tested nothing must not pass.
	if !strings.Contains(out.String(), "# pass ") || strings.Contains(out.String(), "# pass 0") {
		t.Fatalf("npm test ran no tests")
	}
}
