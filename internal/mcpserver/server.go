// Package mcpserver is den's Model Context Protocol server: the tools an
// agent in an MCP client (Claude Desktop and Code, Cursor, any MCP SDK)
// uses to drive sandboxes. Every tool is a call of den's Go SDK on a
// client the caller provides, so an MCP request is checked, scoped,
// audited and woken exactly as the same request to /v1 would be: `den mcp`
// serves them over stdio with the CLI's client, dend at /mcp with a client
// carrying each request's own bearer token.
package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/den-dev/den/client"
	"github.com/den-dev/den/internal/version"
)

// Connect returns the client a tool call runs on: the caller's own, with
// the caller's rights.
type Connect func(ctx context.Context, req *mcp.CallToolRequest) (*client.Client, error)

// Options shape a server.
type Options struct {
	// OutputMax is the most of each output stream a tool returns, the
	// tail kept (default 64 KiB): a model reads all of it.
	OutputMax int
}

type server struct {
	connect Connect
	opts    Options
}

// New returns an MCP server with den's tools, each run on the client
// connect gives it.
func New(connect Connect, opts Options) *mcp.Server {
	if opts.OutputMax <= 0 {
		opts.OutputMax = 64 << 10
	}
	s := &server{connect: connect, opts: opts}
	srv := mcp.NewServer(&mcp.Implementation{Name: "den", Title: "den sandboxes", Version: version.Version},
		&mcp.ServerOptions{Instructions: instructions})
	s.sandboxTools(srv)
	s.execTools(srv)
	s.fileTools(srv)
	s.fileOpTools(srv)
	s.stateTools(srv)
	s.portTools(srv)
	s.settingTools(srv)
	s.peerTools(srv)
	s.serviceTools(srv)
	s.historyTools(srv)
	s.rebaseTools(srv)
	s.observeTools(srv)
	return srv
}

const instructions = `den gives you durable Linux sandboxes (gVisor): files, installed packages and
running processes survive between calls, pauses and hibernation. Create one with
sandbox_create (or use one listed by sandbox_list), run commands with sandbox_exec,
read and write files with file_read, file_write and file_list. Long commands: pass
background=true and read their output with run_output; run_list lists them. Sleeping
sandboxes wake by themselves when a tool needs them. Take a checkpoint before a risky
change and sandbox_restore it if the change goes wrong (checkpoint_list shows the tree);
sandbox_fork copies a sandbox, running processes included; sandbox_recover brings one in
error back. network_set, limits_set and
idle_policy_set change what a sandbox may reach, use and how long it stays awake;
peer_add lets one sandbox read another's files; sandbox_events tells what happened,
sandbox_history what happened since it was made, process_list and sandbox_metrics what
runs and what it uses; quota_get shows what you may still create.
Errors carry a hint saying how to correct the call.`

// add registers a tool whose handler runs f on the caller's client. A
// failure is a tool error the model sees, with den's message and hint.
func add[In, Out any](s *server, srv *mcp.Server, t *mcp.Tool,
	f func(ctx context.Context, c *client.Client, req *mcp.CallToolRequest, in In) (Out, error)) {
	if t.InputSchema == nil {
		t.InputSchema = inputSchema[In](t.Name)
	}
	mcp.AddTool(srv, t, func(ctx context.Context, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, Out, error) {
		var zero Out
		c, err := s.connect(ctx, req)
		if err != nil {
			return nil, zero, toolError(err)
		}
		out, err := f(ctx, c, req, in)
		if err != nil {
			return nil, zero, toolError(err)
		}
		return nil, out, nil
	})
}

// inputSchema is In's JSON schema, as the SDK would infer it, but for the
// optional arguments that are pointers so that absent differs from zero
// (limits_set's pids: 0 lifts the limit): those are typed as their value,
// not also as null. A model leaves them out rather than sending null.
func inputSchema[In any](tool string) *jsonschema.Schema {
	s, err := jsonschema.For[In](&jsonschema.ForOptions{})
	if err != nil {
		panic(fmt.Sprintf("the arguments of tool %s: %v", tool, err)) // a programming error, found at start
	}
	for _, p := range s.Properties {
		if len(p.Types) == 2 && p.Types[0] == "null" {
			p.Type, p.Types = p.Types[1], nil
		}
	}
	return s
}

// toolError is err as a model should read it: den's message, then the
// hint on its own line.
func toolError(err error) error {
	msg := err.Error()
	if h := client.Hint(err); h != "" && !strings.Contains(msg, h) {
		msg += "\nhint: " + h
	}
	return errors.New(msg)
}

// invalid is an error in a tool's arguments, with how to correct them.
func invalid(format string, a ...any) error {
	return fmt.Errorf(format, a...)
}

// Annotations.
func readOnly() *mcp.ToolAnnotations {
	return &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: ptr(false)}
}

func changes(destructive, idempotent bool) *mcp.ToolAnnotations {
	return &mcp.ToolAnnotations{DestructiveHint: ptr(destructive), IdempotentHint: idempotent, OpenWorldHint: ptr(false)}
}

func ptr[T any](v T) *T { return &v }
