package mcpserver

import (
	"context"
	"fmt"
	"time"

	"github.com/docker/go-units"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

// Sandbox is what a model needs of a sandbox's record.
type Sandbox struct {
	Name       string            `json:"name"`
	State      string            `json:"state" jsonschema:"running, paused, hibernated, stopped, error, or a state on the way"`
	Reason     string            `json:"reason,omitempty" jsonschema:"why it is in error or stopped"`
	Image      string            `json:"image"`
	CPUs       float64           `json:"cpus"`
	Memory     string            `json:"memory"`
	Disk       string            `json:"disk,omitempty"`
	Generation int64             `json:"generation" jsonschema:"how many times it has been booted or restored"`
	Network    string            `json:"network" jsonschema:"what it may reach: none, open, or allow: the rules"`
	Ports      []uint16          `json:"ports,omitempty" jsonschema:"exposed ports"`
	Labels     map[string]string `json:"labels,omitempty"`
	Next       string            `json:"next,omitempty" jsonschema:"what its idle policy does next, and when"`
	CreatedAt  time.Time         `json:"created_at"`
}

func sandboxOf(sb *api.Sandbox) Sandbox {
	out := Sandbox{
		Name: sb.Name, State: sb.State, Reason: sb.Reason, Image: sb.Image, CPUs: sb.CPUs,
		Memory: units.BytesSize(float64(sb.MemoryBytes)), Generation: sb.Generation,
		Network: sb.Network.Mode, Labels: sb.Labels, CreatedAt: sb.CreatedAt,
	}
	if sb.DiskBytes > 0 {
		out.Disk = units.BytesSize(float64(sb.DiskBytes))
	}
	if sb.Network.Mode == "allow" {
		out.Network = fmt.Sprintf("allow: %v", sb.Network.Allow)
	}
	for _, p := range sb.Ports {
		out.Ports = append(out.Ports, p.Port)
	}
	out.Next = nextOf(sb)
	return out
}

// nextOf says what a sandbox's idle policy does next, and when.
func nextOf(sb *api.Sandbox) string {
	if sb.Next == nil {
		return ""
	}
	return fmt.Sprintf("%s at %s", sb.Next.Action, sb.Next.At.Format(time.RFC3339))
}

// SandboxRef names a sandbox.
type SandboxRef struct {
	Name string `json:"name" jsonschema:"the sandbox's name"`
}

// CreateInput is sandbox_create's arguments.
type CreateInput struct {
	Name      string            `json:"name" jsonschema:"a new name: letters, digits, '-' and '_', starting with a letter or digit"`
	Image     string            `json:"image,omitempty" jsonschema:"the image to start from (default debian)"`
	Memory    string            `json:"memory,omitempty" jsonschema:"memory limit such as 512M or 2G (default 1G)"`
	CPUs      float64           `json:"cpus,omitempty" jsonschema:"CPU share such as 0.5 or 2 (default 1)"`
	Disk      string            `json:"disk,omitempty" jsonschema:"cap on its files such as 10G (default: the host's)"`
	Env       map[string]string `json:"env,omitempty" jsonschema:"environment for every command"`
	Labels    map[string]string `json:"labels,omitempty"`
	From      string            `json:"from,omitempty" jsonschema:"start from a checkpoint instead of an image: its id, or SANDBOX:NAME"`
	Ephemeral bool              `json:"ephemeral,omitempty" jsonschema:"keep nothing when it is removed"`
	Network   string            `json:"network,omitempty" jsonschema:"none (default) or open; den's admins may restrict open"`
	Allow     []string          `json:"allow,omitempty" jsonschema:"instead of network: the only destinations it may reach, e.g. pypi.org:443 or 203.0.113.0/24"`
}

// SandboxList is sandbox_list's result.
type SandboxList struct {
	Sandboxes []Sandbox `json:"sandboxes"`
}

// Removed is sandbox_remove's result.
type Removed struct {
	Removed string `json:"removed"`
}

func (s *server) sandboxTools(srv *mcp.Server) {
	add(s, srv, &mcp.Tool{
		Name:        "sandbox_create",
		Title:       "Create a sandbox",
		Description: "Create and boot a durable Linux sandbox. Its files and processes stay until it is removed; it pauses and hibernates by itself when idle and wakes when used.",
		Annotations: changes(false, false),
	}, func(ctx context.Context, c *client.Client, _ *mcp.CallToolRequest, in CreateInput) (Sandbox, error) {
		req := api.CreateSandboxRequest{
			Name: in.Name, Image: in.Image, Memory: in.Memory, CPUs: in.CPUs, Disk: in.Disk,
			Env: in.Env, Labels: in.Labels, From: in.From, Ephemeral: in.Ephemeral,
		}
		switch {
		case len(in.Allow) > 0 && in.Network != "" && in.Network != "allow":
			return Sandbox{}, invalid("network %q and allow rules together: give allow alone for a restricted sandbox, or network alone", in.Network)
		case len(in.Allow) > 0:
			req.Network = &api.NetworkPolicy{Mode: "allow", Allow: in.Allow}
		case in.Network != "":
			req.Network = &api.NetworkPolicy{Mode: in.Network}
		}
		sb, err := c.CreateSandbox(ctx, req)
		if err != nil {
			return Sandbox{}, err
		}
		return sandboxOf(sb), nil
	})

	add(s, srv, &mcp.Tool{
		Name:        "sandbox_list",
		Title:       "List sandboxes",
		Description: "List the sandboxes you can use, with their states.",
		Annotations: readOnly(),
	}, func(ctx context.Context, c *client.Client, _ *mcp.CallToolRequest, _ struct{}) (SandboxList, error) {
		sbs, err := c.ListSandboxes(ctx)
		if err != nil {
			return SandboxList{}, err
		}
		out := SandboxList{Sandboxes: []Sandbox{}}
		for i := range sbs {
			out.Sandboxes = append(out.Sandboxes, sandboxOf(&sbs[i]))
		}
		return out, nil
	})

	add(s, srv, &mcp.Tool{
		Name:        "sandbox_get",
		Title:       "Describe a sandbox",
		Description: "Describe one sandbox: state, limits, network, ports, idle policy, and its checkpoints.",
		Annotations: readOnly(),
	}, func(ctx context.Context, c *client.Client, _ *mcp.CallToolRequest, in SandboxRef) (SandboxDetail, error) {
		sb, err := c.GetSandbox(ctx, in.Name)
		if err != nil {
			return SandboxDetail{}, err
		}
		cks, err := c.Checkpoints(ctx, in.Name)
		if err != nil {
			return SandboxDetail{}, err
		}
		d := SandboxDetail{Sandbox: sandboxOf(sb), Checkpoints: []Checkpoint{}}
		for i := range cks {
			d.Checkpoints = append(d.Checkpoints, checkpointOf(&cks[i]))
		}
		return d, nil
	})

	add(s, srv, &mcp.Tool{
		Name:        "sandbox_remove",
		Title:       "Remove a sandbox",
		Description: "Remove a sandbox for good: its processes, files and checkpoints are gone.",
		Annotations: changes(true, true),
	}, func(ctx context.Context, c *client.Client, _ *mcp.CallToolRequest, in SandboxRef) (Removed, error) {
		if err := c.RemoveSandbox(ctx, in.Name, true); err != nil {
			return Removed{}, err
		}
		return Removed{Removed: in.Name}, nil
	})
}

// SandboxDetail is sandbox_get's result.
type SandboxDetail struct {
	Sandbox
	Checkpoints []Checkpoint `json:"checkpoints"`
}
