package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/den-dev/den/client"
)

// Every tool says whether it changes anything, and what it takes and
// answers: a tool that reads is marked read-only (so a client may run it
// without asking), one that changes is not.
func TestToolsAreAnnotatedAndTyped(t *testing.T) {
	ctx := context.Background()
	srv := New(func(context.Context, *mcp.CallToolRequest) (*client.Client, error) {
		return nil, errors.New("no dend in this test")
	}, Options{})
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	reads := map[string]bool{"run_output": true, "file_read": true, "file_stat": true, "sandbox_events": true, "sandbox_history": true, "sandbox_metrics": true}
	for _, tool := range res.Tools {
		t.Run(tool.Name, func(t *testing.T) {
			a := tool.Annotations
			if a == nil || tool.OutputSchema == nil || tool.InputSchema == nil || len(tool.Description) < 20 {
				t.Fatalf("annotations %+v, output schema %v, description %q", a, tool.OutputSchema, tool.Description)
			}
			read := reads[tool.Name] || strings.HasSuffix(tool.Name, "_get") || strings.HasSuffix(tool.Name, "_list")
			if a.ReadOnlyHint != read {
				t.Errorf("readOnlyHint %v", a.ReadOnlyHint)
			}
			if !read && a.DestructiveHint == nil {
				t.Error("a tool that changes things says nothing of destroying")
			}
		})
	}
	// Optional arguments that are pointers in Go are typed as their
	// value: a model leaves them out, it does not send null.
	for _, tool := range res.Tools {
		if tool.Name != "limits_set" {
			continue
		}
		b, _ := json.Marshal(tool.InputSchema)
		var schema struct {
			Properties map[string]struct {
				Type any `json:"type"`
			} `json:"properties"`
		}
		if err := json.Unmarshal(b, &schema); err != nil || schema.Properties["pids"].Type != "integer" || schema.Properties["memory"].Type != "string" {
			t.Errorf("limits_set's arguments: %s", b)
		}
	}
	if len(res.Tools) != 54 {
		t.Errorf("%d tools", len(res.Tools))
	}
}
