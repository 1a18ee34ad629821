package mcpserver

import (
	"context"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

// Checkpoint is a saved state of a sandbox.
type Checkpoint struct {
	ID        string    `json:"id"`
	Name      string    `json:"name,omitempty"`
	Kind      string    `json:"kind" jsonschema:"manual, hibernate or fork"`
	Memory    bool      `json:"memory" jsonschema:"holds running processes, not only files"`
	Parent    string    `json:"parent,omitempty"`
	CreatedAt time.Time `json:"created_at"`
}

func checkpointOf(ck *api.Checkpoint) Checkpoint {
	return Checkpoint{ID: ck.ID, Name: ck.Name, Kind: ck.Kind, Memory: ck.Memory, Parent: ck.Parent, CreatedAt: ck.CreatedAt}
}

// CheckpointInput is checkpoint_create's arguments.
type CheckpointInput struct {
	Name      string `json:"name" jsonschema:"the sandbox's name"`
	Label     string `json:"label,omitempty" jsonschema:"a name for the checkpoint, unique in the sandbox"`
	FilesOnly bool   `json:"files_only,omitempty" jsonschema:"save files only, not running processes (smaller; a restore boots afresh)"`
}

// RestoreInput is sandbox_restore's arguments.
type RestoreInput struct {
	Name       string `json:"name" jsonschema:"the sandbox's name"`
	Checkpoint string `json:"checkpoint" jsonschema:"the checkpoint's id or label"`
}

// ForkInput is sandbox_fork's arguments.
type ForkInput struct {
	Name       string `json:"name" jsonschema:"the sandbox to copy"`
	NewName    string `json:"new_name" jsonschema:"the copy's name; with count above 1 the copies are NEW_NAME-1 to NEW_NAME-N"`
	Checkpoint string `json:"checkpoint,omitempty" jsonschema:"copy this checkpoint of it instead of its present state"`
	Count      int    `json:"count,omitempty" jsonschema:"how many copies (default 1)"`
}

// Forked is sandbox_fork's result.
type Forked struct {
	Sandboxes []Sandbox `json:"sandboxes"`
}

// RecoverInput is sandbox_recover's arguments.
type RecoverInput struct {
	Name       string `json:"name" jsonschema:"the sandbox's name; it must be in state error"`
	Mode       string `json:"mode,omitempty" jsonschema:"retry (default): restore the checkpoint that failed again; cold: boot afresh from its files, losing its processes; rollback: restore an earlier checkpoint"`
	Checkpoint string `json:"checkpoint,omitempty" jsonschema:"with rollback: the checkpoint to go back to (default: the newest before the one that failed)"`
}

func (s *server) stateTools(srv *mcp.Server) {
	sleepVerb := func(name, title, desc string, f func(*client.Client) func(context.Context, string) (*api.Sandbox, error)) {
		s.stateVerb(srv, &mcp.Tool{Name: name, Title: title, Description: desc, Annotations: changes(false, true)}, f)
	}
	sleepVerb("sandbox_pause", "Pause a sandbox",
		"Freeze a sandbox in RAM: its processes stop using CPU and carry on when it resumes. Any tool that uses it wakes it.",
		func(c *client.Client) func(context.Context, string) (*api.Sandbox, error) { return c.Pause })
	sleepVerb("sandbox_resume", "Resume a sandbox",
		"Wake a paused or hibernated sandbox; its processes carry on where they were.",
		func(c *client.Client) func(context.Context, string) (*api.Sandbox, error) { return c.Resume })
	sleepVerb("sandbox_hibernate", "Hibernate a sandbox",
		"Save a sandbox's memory and processes to disk and free its RAM; it wakes with everything as it was when a tool uses it.",
		func(c *client.Client) func(context.Context, string) (*api.Sandbox, error) { return c.Hibernate })
	s.stateVerb(srv, &mcp.Tool{
		Name: "sandbox_stop", Title: "Stop a sandbox",
		Description: "Stop a sandbox: its processes end, its files stay. sandbox_start boots it again, afresh from its files.",
		Annotations: changes(true, true),
	}, func(c *client.Client) func(context.Context, string) (*api.Sandbox, error) { return c.StopSandbox })
	s.stateVerb(srv, &mcp.Tool{
		Name: "sandbox_start", Title: "Start a sandbox",
		Description: "Boot a stopped sandbox afresh from its files.",
		Annotations: changes(false, true),
	}, func(c *client.Client) func(context.Context, string) (*api.Sandbox, error) { return c.StartSandbox })

	add(s, srv, &mcp.Tool{
		Name:  "sandbox_recover",
		Title: "Recover a sandbox in error",
		Description: "Bring a sandbox in state error back to running: retry its checkpoint, boot it cold from its files (its processes are lost), " +
			"or roll it back to an earlier checkpoint (what changed since is lost).",
		Annotations: changes(true, false),
	}, func(ctx context.Context, c *client.Client, _ *mcp.CallToolRequest, in RecoverInput) (Sandbox, error) {
		switch in.Mode {
		case "", api.RecoverRetry, api.RecoverCold, api.RecoverRollback:
		default:
			return Sandbox{}, invalid("mode %q: give retry, cold or rollback", in.Mode)
		}
		if in.Checkpoint != "" && in.Mode != api.RecoverRollback {
			return Sandbox{}, invalid("checkpoint with mode %q: a checkpoint is only for mode rollback", in.Mode)
		}
		sb, err := c.Recover(ctx, in.Name, client.RecoverOptions{Mode: in.Mode, Checkpoint: in.Checkpoint})
		if err != nil {
			return Sandbox{}, err
		}
		return sandboxOf(sb), nil
	})

	add(s, srv, &mcp.Tool{
		Name:        "checkpoint_create",
		Title:       "Checkpoint a sandbox",
		Description: "Save a sandbox's files and running processes at this instant, to restore or fork later. It keeps running.",
		Annotations: changes(false, false),
	}, func(ctx context.Context, c *client.Client, _ *mcp.CallToolRequest, in CheckpointInput) (Checkpoint, error) {
		ck, err := c.Checkpoint(ctx, in.Name, client.CheckpointOptions{Name: in.Label, FSOnly: in.FilesOnly})
		if err != nil {
			return Checkpoint{}, err
		}
		return checkpointOf(ck), nil
	})

	add(s, srv, &mcp.Tool{
		Name:        "sandbox_restore",
		Title:       "Restore a checkpoint",
		Description: "Put a sandbox back to one of its checkpoints: files and processes as they were then. What changed since is lost unless checkpointed.",
		Annotations: changes(true, true),
	}, func(ctx context.Context, c *client.Client, _ *mcp.CallToolRequest, in RestoreInput) (Sandbox, error) {
		sb, err := c.Restore(ctx, in.Name, in.Checkpoint)
		if err != nil {
			return Sandbox{}, err
		}
		return sandboxOf(sb), nil
	})

	add(s, srv, &mcp.Tool{
		Name:        "sandbox_fork",
		Title:       "Fork a sandbox",
		Description: "Copy a sandbox, running processes included, into new sandboxes that go their own way.",
		Annotations: changes(false, false),
	}, func(ctx context.Context, c *client.Client, _ *mcp.CallToolRequest, in ForkInput) (Forked, error) {
		if in.Count < 0 {
			return Forked{}, invalid("count is %d: give 1 or more, or leave it out", in.Count)
		}
		sbs, err := c.Fork(ctx, in.Name, client.ForkOptions{Name: in.NewName, From: in.Checkpoint, Count: in.Count})
		if err != nil {
			return Forked{}, err
		}
		out := Forked{Sandboxes: []Sandbox{}}
		for i := range sbs {
			out.Sandboxes = append(out.Sandboxes, sandboxOf(&sbs[i]))
		}
		return out, nil
	})
}

// stateVerb registers a tool that moves a sandbox to another state and
// answers it as it then is.
func (s *server) stateVerb(srv *mcp.Server, t *mcp.Tool, f func(*client.Client) func(context.Context, string) (*api.Sandbox, error)) {
	sandboxTool(s, srv, t, f, sandboxOf)
}

// sandboxTool registers a tool that makes one call on the sandbox it
// names and answers what view shows of the sandbox the call returned.
func sandboxTool[Out any](s *server, srv *mcp.Server, t *mcp.Tool,
	call func(*client.Client) func(context.Context, string) (*api.Sandbox, error), view func(*api.Sandbox) Out) {
	add(s, srv, t, func(ctx context.Context, c *client.Client, _ *mcp.CallToolRequest, in SandboxRef) (Out, error) {
		sb, err := call(c)(ctx, in.Name)
		if err != nil {
			var zero Out
			return zero, err
		}
		return view(sb), nil
	})
}
