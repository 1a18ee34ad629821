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

// PortInput is port_expose's arguments.
type PortInput struct {
	Name   string `json:"name" jsonschema:"the sandbox's name"`
	Port   int    `json:"port" jsonschema:"the TCP port a server listens on inside the sandbox"`
	Public bool   `json:"public,omitempty" jsonschema:"reachable by anyone who can reach den, with no token (default: only through a signed link that expires)"`
	// ExpiresMinutes sizes the signed link of a private port.
	ExpiresMinutes int `json:"expires_minutes,omitempty" jsonschema:"how long a private port's link works (default 60)"`
}

// UnexposeInput is port_unexpose's arguments.
type UnexposeInput struct {
	Name string `json:"name" jsonschema:"the sandbox's name"`
	Port int    `json:"port" jsonschema:"the exposed port"`
}

// Unexposed is port_unexpose's result.
type Unexposed struct {
	Name      string `json:"name"`
	Unexposed int    `json:"unexposed" jsonschema:"the port no longer reachable through den; its links stop working"`
}

// Exposed is port_expose's result.
type Exposed struct {
	Port    int       `json:"port"`
	Public  bool      `json:"public"`
	URL     string    `json:"url,omitempty" jsonschema:"open it in a browser or with curl"`
	Path    string    `json:"path" jsonschema:"the URL's path under dend's own address"`
	Expires time.Time `json:"expires,omitzero"`
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

// portTools serve a sandbox's ports through den, and stop serving them.
func (s *server) portTools(srv *mcp.Server) {
	add(s, srv, &mcp.Tool{
		Name:        "port_expose",
		Title:       "Expose a port",
		Description: "Make a server listening on a port inside a sandbox reachable over HTTP through den, and return its URL.",
		Annotations: changes(false, true),
	}, func(ctx context.Context, c *client.Client, _ *mcp.CallToolRequest, in PortInput) (Exposed, error) {
		if in.Port < 1 || in.Port > 65535 {
			return Exposed{}, invalid("port %d: give a TCP port from 1 to 65535", in.Port)
		}
		if in.ExpiresMinutes < 0 {
			return Exposed{}, invalid("expires_minutes is %d: give a positive number, or leave it out", in.ExpiresMinutes)
		}
		port := uint16(in.Port)
		if _, err := c.ExposePort(ctx, in.Name, port, in.Public); err != nil {
			return Exposed{}, err
		}
		out := Exposed{Port: in.Port, Public: in.Public}
		expires := time.Duration(in.ExpiresMinutes) * time.Minute
		if expires == 0 {
			expires = time.Hour
		}
		u, err := c.PortURL(ctx, in.Name, port, expires)
		if err != nil {
			return Exposed{}, err
		}
		out.URL, out.Path = u.URL, u.Path
		if !in.Public {
			out.Expires = u.ExpiresAt
		}
		return out, nil
	})

	add(s, srv, &mcp.Tool{
		Name:        "port_unexpose",
		Title:       "Stop exposing a port",
		Description: "Stop serving a sandbox's port through den: its URL and every link to it stop working. The server inside keeps running.",
		Annotations: changes(true, true),
	}, func(ctx context.Context, c *client.Client, _ *mcp.CallToolRequest, in UnexposeInput) (Unexposed, error) {
		if in.Port < 1 || in.Port > 65535 {
			return Unexposed{}, invalid("port %d: give a TCP port from 1 to 65535", in.Port)
		}
		if err := c.UnexposePort(ctx, in.Name, uint16(in.Port)); err != nil {
			return Unexposed{}, err
		}
		return Unexposed{Name: in.Name, Unexposed: in.Port}, nil
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
