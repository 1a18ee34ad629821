package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

// mcpExec measures sandbox_exec of `true` through dend's /mcp (streamable
// HTTP, one session) beside the same exec through the Go SDK and through
// the den CLI, in one run.
func (b *bench) mcpExec() error {
	name := "mcp"
	if _, err := b.d.c.CreateSandbox(b.ctx, api.CreateSandboxRequest{Name: name, Image: "busybox", Memory: "256M"}); err != nil {
		return err
	}
	defer b.d.c.RemoveSandbox(b.ctx, name, true)

	sock := filepath.Join(b.work, "den.sock")
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	mc := mcp.NewClient(&mcp.Implementation{Name: "den-bench", Version: "1"}, nil)
	session, err := mc.Connect(b.ctx, &mcp.StreamableClientTransport{Endpoint: "http://den/mcp", HTTPClient: hc}, nil)
	if err != nil {
		return fmt.Errorf("connecting to /mcp: %w", err)
	}
	defer session.Close()

	viaMCP := func() error {
		res, err := session.CallTool(b.ctx, &mcp.CallToolParams{Name: "sandbox_exec", Arguments: map[string]any{"name": name, "argv": []string{"true"}}})
		if err != nil {
			return err
		}
		if res.IsError {
			return fmt.Errorf("sandbox_exec: %v", res.Content)
		}
		return nil
	}
	viaSDK := func() error {
		_, err := b.d.c.Exec(b.ctx, name, api.ExecRequest{Argv: []string{"true"}}, client.ExecIO{})
		return err
	}
	viaCLI := func() error {
		cmd := exec.Command(filepath.Join(b.bin, "den"), "--socket", sock, "exec", name, "--", "true")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("den exec: %w: %s", err, out)
		}
		return nil
	}
	// Warm each path once, then alternate so drift hits all three alike.
	for _, f := range []func() error{viaMCP, viaSDK, viaCLI} {
		if err := f(); err != nil {
			return err
		}
	}
	var m, s, c samples
	for range b.n {
		for _, p := range []struct {
			f    func() error
			into *samples
		}{{viaMCP, &m}, {viaSDK, &s}, {viaCLI, &c}} {
			d, err := timed(p.f)
			if err != nil {
				return err
			}
			*p.into = append(*p.into, d)
		}
	}
	b.add(section{title: "front doors: exec of `true`", rows: []row{
		{op: "MCP sandbox_exec via /mcp (raw: den exec CLI)", den: m, raw: c, goal: "≤ 1.5× den exec", note: ratio(m, c)},
		{op: "MCP sandbox_exec via /mcp (raw: Go SDK exec)", den: m, raw: s, note: ratio(m, s)},
	}})
	return nil
}
