package main

import (
	"github.com/den-dev/den/cmd/den/internal/cli"

	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/internal/auth"
	"github.com/den-dev/den/internal/httpapi"
	"github.com/den-dev/den/internal/secret"
	"github.com/den-dev/den/internal/store/sqlite"
)

// accessDend serves dend's real API for tokens, audit and secrets, over a
// real store, on a unix socket as dend does; it returns the socket.
func accessDend(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	st, err := sqlite.Open(t.Context(), filepath.Join(dir, "den.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	tokens, err := auth.New(auth.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	vault, err := secret.Open(t.Context(), secret.Config{KeyFile: filepath.Join(dir, "secrets.key"), Store: st})
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "den.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	h := httpapi.New(httpapi.Config{Tokens: tokens, Audit: st, Secrets: vault, Logger: slog.New(slog.DiscardHandler)})
	srv := &http.Server{Handler: httpapi.Local(h)}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return sock
}

// runDenIn is runDen with stdin.
func runDenIn(t *testing.T, sock, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	a := &cli.App{
		Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errOut,
		Getenv: func(k string) string {
			if k == "DEN_SOCKET" {
				return sock
			}
			return ""
		},
	}
	code = run(context.Background(), a, args)
	return code, out.String(), errOut.String()
}

func TestTokenCommands(t *testing.T) {
	sock := accessDend(t)
	code, stdout, stderr := runDen(t, sock, "token", "create", "agent", "--scope", "owner", "--expires", "24h")
	if code != 0 {
		t.Fatalf("token create: %d %s", code, stderr)
	}
	tok := strings.TrimSpace(stdout)
	if _, ok := auth.ParseToken(tok); !ok || stdout != tok+"\n" {
		t.Errorf("stdout = %q, want the token alone", stdout)
	}
	if !strings.Contains(stderr, "made token agent") || !strings.Contains(stderr, "scope owner") || strings.Contains(stderr, tok) {
		t.Errorf("stderr = %q", stderr)
	}

	code, stdout, _ = runDen(t, sock, "--json", "token", "create", "viewer", "--scope", "owner:read", "--for", "agent")
	var viewer api.Token
	if err := json.Unmarshal([]byte(stdout), &viewer); code != 0 || err != nil || !strings.HasPrefix(viewer.Token, "den_") {
		t.Fatalf("token create --json: %d %s", code, stdout)
	}

	code, stdout, _ = runDen(t, sock, "token", "ls")
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if code != 0 || len(lines) != 3 || !strings.HasPrefix(lines[0], "ID ") || !strings.Contains(lines[1], "agent") ||
		!strings.Contains(lines[1], "active") || !strings.Contains(lines[1], "in 2") {
		t.Errorf("token ls: %d\n%s", code, stdout)
	}
	if strings.Contains(stdout, tok) || strings.Contains(stdout, viewer.Token) {
		t.Errorf("token ls shows a token:\n%s", stdout)
	}

	if code, stdout, stderr := runDen(t, sock, "token", "revoke", "agent"); code != 0 || stdout != "agent\n" {
		t.Errorf("token revoke: %d %q %s", code, stdout, stderr)
	}
	_, stdout, _ = runDen(t, sock, "token", "ls")
	if !strings.Contains(stdout, "revoked") {
		t.Errorf("token ls after revoke:\n%s", stdout)
	}
	code, _, stderr = runDen(t, sock, "token", "create", "x", "--scope", "root")
	if code != 1 || !strings.Contains(stderr, `unknown token scope "root"`) || !strings.Contains(stderr, "hint: ") {
		t.Errorf("bad scope: %d %s", code, stderr)
	}
	for _, argv := range [][]string{{"token"}, {"token", "create", "x"}, {"token", "create", "x", "--scope", "owner", "--expires", "soon"}} {
		if code, _, stderr := runDen(t, sock, argv...); code != 2 || !strings.Contains(stderr, "hint: ") {
			t.Errorf("%v: %d %s", argv, code, stderr)
		}
	}
}

func TestSecretCommands(t *testing.T) {
	sock := accessDend(t)
	if code, stdout, stderr := runDenIn(t, sock, "from-stdin", "secret", "set", "API_KEY"); code != 0 || stdout != "API_KEY\n" {
		t.Fatalf("secret set from stdin: %d %q %s", code, stdout, stderr)
	}
	file := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(file, []byte("from-file"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runDen(t, sock, "secret", "set", "DB_PASSWORD", "--file", file); code != 0 {
		t.Fatalf("secret set --file: %d %s", code, stderr)
	}
	big := filepath.Join(t.TempDir(), "big")
	if err := os.WriteFile(big, bytes.Repeat([]byte("x"), api.MaxSecretBytes+1), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		argv []string
		code int
		msg  string
	}{
		{[]string{"secret", "set", "BIG", "--file", big}, 1, "over the 64 KiB limit"},
		{[]string{"secret", "set", "PW", "hunter2"}, 2, "takes no value argument"},
		{[]string{"secret", "set", "1BAD"}, 1, "invalid secret name"},
		{[]string{"secret", "set", "X", "--file", filepath.Join(t.TempDir(), "none")}, 1, "no such file"},
		{[]string{"secret", "rm", "NOPE"}, 1, `secret "NOPE" not found`},
		{[]string{"secret"}, 2, "missing the secret command"},
	} {
		code, _, stderr := runDen(t, sock, tc.argv...)
		if code != tc.code || !strings.Contains(stderr, tc.msg) {
			t.Errorf("%v: %d %s, want %d saying %q", tc.argv, code, stderr, tc.code, tc.msg)
		}
	}
	code, stdout, _ := runDen(t, sock, "secret", "ls")
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if code != 0 || len(lines) != 3 || !strings.HasPrefix(lines[1], "API_KEY ") || !strings.HasPrefix(lines[2], "DB_PASSWORD ") {
		t.Errorf("secret ls (refused sets must add nothing): %d\n%s", code, stdout)
	}
	if strings.Contains(stdout, "from-") {
		t.Errorf("secret ls shows a value:\n%s", stdout)
	}
	if code, stdout, _ := runDen(t, sock, "secret", "rm", "API_KEY", "DB_PASSWORD"); code != 0 || stdout != "API_KEY\nDB_PASSWORD\n" {
		t.Errorf("secret rm: %d %q", code, stdout)
	}
	if code, stdout, _ := runDen(t, sock, "--json", "secret", "ls"); code != 0 || strings.TrimSpace(stdout) != "[]" {
		t.Errorf("secret ls --json when empty: %d %q", code, stdout)
	}
}

func TestAuditCommand(t *testing.T) {
	sock := accessDend(t)
	runDenIn(t, sock, "v", "secret", "set", "A")
	runDen(t, sock, "secret", "rm", "B")
	code, stdout, stderr := runDen(t, sock, "audit")
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if code != 0 || len(lines) != 3 || !strings.HasPrefix(lines[0], "TIME ") {
		t.Fatalf("audit: %d %s\n%s", code, stderr, stdout)
	}
	for i, want := range []string{"PUT /v1/secrets/A", "DELETE /v1/secrets/B"} {
		if !strings.Contains(lines[i+1], auth.RootName) || !strings.Contains(lines[i+1], want) {
			t.Errorf("line %d = %q, want root's %s", i+1, lines[i+1], want)
		}
	}
	if !strings.Contains(lines[2], "404") || !strings.Contains(lines[2], `secret "B" not found`) {
		t.Errorf("failed call line = %q", lines[2])
	}
	code, stdout, _ = runDen(t, sock, "--json", "audit", "--limit", "1", "--since", "1h", "--token", auth.RootName)
	var entries []api.AuditEntry
	if err := json.Unmarshal([]byte(stdout), &entries); code != 0 || err != nil || len(entries) != 1 || entries[0].Status != 404 {
		t.Errorf("audit --json --limit 1: %d %s", code, stdout)
	}
	if code, _, stderr := runDen(t, sock, "audit", "--limit", "-5"); code != 1 || !strings.Contains(stderr, "invalid") {
		t.Errorf("audit --limit -5: %d %s", code, stderr)
	}
}
