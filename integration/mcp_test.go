package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// jsDir holds the third-party JavaScript clients the tests drive,
// installed by `npm ci` (make test does it).
func jsDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("js")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk")); err != nil {
		t.Fatalf("the JavaScript clients are not installed: run `npm ci` in %s (make test does)", dir)
	}
	return dir
}

// node runs a script of jsDir with env added and returns its output,
// failing the test when it fails.
func node(t *testing.T, timeout time.Duration, env []string, args ...string) string {
	t.Helper()
	dir := jsDir(t)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("node %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, out.String(), errb.String())
	}
	return out.String()
}

// The official MCP TypeScript SDK drives every tool through `den mcp`
// over stdio, as Claude Desktop or Cursor would start it, with an owner
// token to a remote dend.
func TestMCPStdio(t *testing.T) {
	addr := freeAddr(t)
	d := startDend(t, "--listen", addr)
	owner := strings.TrimSpace(d.mustDen("", "token", "create", "agent", "--scope", "owner"))
	out := node(t, 8*time.Minute, []string{"MODE=stdio", "DEN=" + filepath.Join(binDir, "den"),
		"DEN_HOST=http://" + addr, "DEN_TOKEN=" + owner, "NAME=agent"},
		"mcp_scenario.mjs")
	if strings.TrimSpace(out) != "ok" {
		t.Fatalf("scenario output: %q", out)
	}
	// The tools really acted on dend: the scenario's sandboxes were made
	// and removed, and its calls are in the audit log as API calls.
	if _, err := d.c.GetSandbox(ctxT(t, 10*time.Second), "agent"); err == nil {
		t.Error("the scenario's sandbox is still there")
	}
	audit := d.mustDen("", "audit", "--json")
	for _, want := range []string{"/v1/sandboxes/agent/fork", "/v1/sandboxes/agent/restore", "/v1/sandboxes/agent/network",
		"/v1/sandboxes/agent/rebase", "/v1/sandboxes/agent-kid/peers"} {
		if !strings.Contains(audit, want) {
			t.Errorf("audit log has no %s", want)
		}
	}
}

// The same scenario over streamable HTTP at dend's /mcp with an owner
// token; then the token's reach: other owners' sandboxes are invisible,
// and a request without a valid token is refused before MCP.
func TestMCPHTTP(t *testing.T) {
	addr := freeAddr(t)
	d := startDend(t, "--listen", addr)
	alice := strings.TrimSpace(d.mustDen("", "token", "create", "alice", "--scope", "owner"))
	bob := strings.TrimSpace(d.mustDen("", "token", "create", "bob", "--scope", "owner"))
	url := "http://" + addr + "/mcp"

	out := node(t, 8*time.Minute, []string{"MODE=http", "MCP_URL=" + url, "MCP_TOKEN=" + alice, "NAME=agent"}, "mcp_scenario.mjs")
	if strings.TrimSpace(out) != "ok" {
		t.Fatalf("scenario output: %q", out)
	}

	ctx := ctxT(t, 3*time.Minute)
	asBob := mcpSession(t, ctx, url, bob)
	if res := callTool(t, ctx, asBob, "sandbox_create", map[string]any{"name": "bobs", "image": "busybox", "memory": "256M"}); res.IsError {
		t.Fatalf("bob's create: %s", toolText(res))
	}
	asAlice := mcpSession(t, ctx, url, alice)
	list := callTool(t, ctx, asAlice, "sandbox_list", map[string]any{})
	if strings.Contains(toolText(list), "bobs") {
		t.Errorf("alice sees bob's sandbox: %s", toolText(list))
	}
	for _, tool := range []string{"sandbox_get", "sandbox_remove", "sandbox_pause", "sandbox_stop",
		"network_get", "limits_get", "idle_policy_get", "peer_list", "checkpoint_list", "run_list", "sandbox_events",
		"sandbox_rebase", "sandbox_setup", "sandbox_recover", "sandbox_metrics", "process_list", "sandbox_history"} {
		res := callTool(t, ctx, asAlice, tool, map[string]any{"name": "bobs"})
		if !res.IsError || !strings.Contains(toolText(res), "not found") {
			t.Errorf("alice's %s of bob's sandbox: %s", tool, toolText(res))
		}
	}
	for tool, args := range map[string]map[string]any{
		"network_set":       {"name": "bobs", "mode": "open"},
		"limits_set":        {"name": "bobs", "memory": "512M"},
		"idle_policy_set":   {"name": "bobs", "stop_after": "1m"},
		"checkpoint_delete": {"name": "bobs", "checkpoint": "x"},
		"peer_add":          {"name": "bobs", "other": "bobs", "restart": true},
		"file_stat":         {"name": "bobs", "path": "/root"},
		"file_mkdir":        {"name": "bobs", "path": "/root/x"},
		"file_move":         {"name": "bobs", "from": "/root", "to": "/x"},
		"file_remove":       {"name": "bobs", "path": "/root", "recursive": true},
		"run_stdin":         {"name": "bobs", "run_id": "x", "close": true},
		"port_link":         {"name": "bobs", "port": 8080},
		"port_links_revoke": {"name": "bobs", "port": 8080},
	} {
		res := callTool(t, ctx, asAlice, tool, args)
		if !res.IsError || !strings.Contains(toolText(res), "not found") {
			t.Errorf("alice's %s of bob's sandbox: %s", tool, toolText(res))
		}
	}
	// Nor can alice give her own sandbox a view of bob's.
	if res := callTool(t, ctx, asAlice, "sandbox_create", map[string]any{"name": "alices", "image": "busybox", "memory": "256M"}); res.IsError {
		t.Fatalf("alice's create: %s", toolText(res))
	}
	res := callTool(t, ctx, asAlice, "peer_add", map[string]any{"name": "alices", "other": "bobs", "restart": true})
	if !res.IsError || !strings.Contains(toolText(res), "not found") {
		t.Errorf("alice's view of bob's sandbox: %s", toolText(res))
	}
	// A read-only companion of bob's token reads through the new tools
	// and changes nothing.
	viewer := strings.TrimSpace(d.mustDen("", "token", "create", "bob-viewer", "--scope", "owner:read", "--for", "bob"))
	asViewer := mcpSession(t, ctx, url, viewer)
	if res := callTool(t, ctx, asViewer, "network_get", map[string]any{"name": "bobs"}); res.IsError || !strings.Contains(toolText(res), `"mode":"none"`) {
		t.Errorf("bob's viewer's network_get: %s", toolText(res))
	}
	for tool, args := range map[string]map[string]any{
		"network_set":       {"name": "bobs", "mode": "open"},
		"limits_set":        {"name": "bobs", "memory": "512M"},
		"idle_policy_set":   {"name": "bobs", "stop_after": "1m"},
		"sandbox_stop":      {"name": "bobs"},
		"sandbox_recover":   {"name": "bobs"},
		"file_mkdir":        {"name": "bobs", "path": "/root/x"},
		"file_move":         {"name": "bobs", "from": "/root", "to": "/x"},
		"file_remove":       {"name": "bobs", "path": "/root", "recursive": true},
		"run_stdin":         {"name": "bobs", "run_id": "x", "close": true},
		"port_links_revoke": {"name": "bobs", "port": 8080},
	} {
		res := callTool(t, ctx, asViewer, tool, args)
		if !res.IsError || !strings.Contains(toolText(res), "read-only") {
			t.Errorf("bob's viewer's %s: %s", tool, toolText(res))
		}
	}
	// The viewer reads through the new read-only tools, and its quota is
	// bob's.
	for tool, args := range map[string]map[string]any{
		"file_stat":       {"name": "bobs", "path": "/root"},
		"process_list":    {"name": "bobs"},
		"sandbox_history": {"name": "bobs"},
		"sandbox_metrics": {"name": "bobs"},
		"image_list":      {},
		"quota_get":       {},
	} {
		if res := callTool(t, ctx, asViewer, tool, args); res.IsError {
			t.Errorf("bob's viewer's %s: %s", tool, toolText(res))
		}
	}
	var quota struct {
		Use struct {
			Sandboxes   int   `json:"sandboxes"`
			MemoryBytes int64 `json:"memory_bytes"`
		} `json:"use"`
	}
	res = callTool(t, ctx, asViewer, "quota_get", map[string]any{})
	if err := json.Unmarshal([]byte(toolText(res)), &quota); err != nil || quota.Use.Sandboxes != 1 || quota.Use.MemoryBytes != 256<<20 {
		t.Errorf("bob's viewer's quota_get: %s", toolText(res))
	}
	if out, _, code := d.sh("bobs", "ls -d /root"); code != 0 {
		t.Errorf("bob's /root after the attempts: %s", out)
	}
	sb, err := d.c.GetSandbox(ctx, "bobs")
	if err != nil || sb.State != "running" || sb.Network.Mode != "none" || sb.MemoryBytes != 256<<20 || *sb.Policy.StopAfter == "1m" {
		t.Errorf("bob's sandbox after alice's and the viewer's attempts: %+v, %v", sb, err)
	}

	// A message too large for /mcp is refused whole, and changes nothing.
	huge := `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"file_write","arguments":{"name":"bobs","path":"/root/huge","content":"` +
		strings.Repeat("x", 5<<20) + `"}}}`
	req, _ := http.NewRequest("POST", url, strings.NewReader(huge))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+bob)
	req.Header.Set("Mcp-Session-Id", asBob.ID())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	t.Logf("a 5 MiB message to /mcp: %d %s", resp.StatusCode, body)
	if resp.StatusCode < 400 {
		t.Errorf("a 5 MiB message to /mcp: %d %s", resp.StatusCode, body)
	}
	if out, _, code := d.sh("bobs", "ls /root/huge"); code == 0 {
		t.Errorf("the oversized write happened: %s", out)
	}

	for _, auth := range []string{"", "Bearer den_not-a-token"} {
		req, _ := http.NewRequest("POST", url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(resp.Header.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("/mcp with Authorization %q: %d %v", auth, resp.StatusCode, resp.Header)
		}
	}
}

// @modelcontextprotocol/inspector's CLI lists and calls den's tools.
func TestMCPInspector(t *testing.T) {
	d := startDend(t)
	d.create("seen")
	inspect := func(args ...string) string {
		return node(t, 2*time.Minute, nil, append([]string{"node_modules/.bin/mcp-inspector", "--cli", "-e", "DEN_SOCKET=" + d.socket,
			filepath.Join(binDir, "den"), "mcp"}, args...)...)
	}
	var tools struct {
		Tools []struct{ Name string } `json:"tools"`
	}
	if err := json.Unmarshal([]byte(inspect("--method", "tools/list")), &tools); err != nil || len(tools.Tools) != 54 {
		t.Fatalf("tools/list: %d tools, %v", len(tools.Tools), err)
	}
	got := inspect("--method", "tools/call", "--tool-name", "sandbox_get", "--tool-arg", "name=seen")
	if !strings.Contains(got, `"state": "running"`) && !strings.Contains(got, `\"state\":\"running\"`) {
		t.Fatalf("tools/call sandbox_get: %s", got)
	}
}

func mcpSession(t *testing.T, ctx context.Context, url, token string) *mcp.ClientSession {
	t.Helper()
	hc := &http.Client{Transport: bearer{token}}
	c := mcp.NewClient(&mcp.Implementation{Name: "den-test", Version: "1"}, nil)
	s, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func callTool(t *testing.T, ctx context.Context, s *mcp.ClientSession, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res
}

func toolText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// bearer adds a bearer token to every request.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}
