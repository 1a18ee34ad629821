package mcpserver

import (
	"context"

	"github.com/docker/go-units"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

// Network is what a sandbox may reach.
type Network struct {
	Name  string   `json:"name" jsonschema:"the sandbox's name"`
	Mode  string   `json:"mode" jsonschema:"none (reaches nothing), allow (only the rules in allow) or open (the internet)"`
	Allow []string `json:"allow,omitempty" jsonschema:"with mode allow: the destinations it may reach"`
}

// NetworkInput is network_set's arguments.
type NetworkInput struct {
	Name  string   `json:"name" jsonschema:"the sandbox's name"`
	Mode  string   `json:"mode,omitempty" jsonschema:"none or open; leave it out when giving allow. den's admins may restrict open"`
	Allow []string `json:"allow,omitempty" jsonschema:"instead of mode: the only destinations it may reach, e.g. pypi.org:443, *.pythonhosted.org:443 or 203.0.113.0/24"`
}

// SandboxLimits are a sandbox's limits and what it uses of them now.
type SandboxLimits struct {
	Name   string  `json:"name" jsonschema:"the sandbox's name"`
	CPUs   float64 `json:"cpus"`
	Memory string  `json:"memory"`
	PIDs   int     `json:"pids" jsonschema:"the most processes it may run; 0: no limit"`
	Disk   string  `json:"disk" jsonschema:"cap on its files; 0: none"`
	Usage  *Usage  `json:"usage,omitempty" jsonschema:"what it uses now"`
}

// Usage is what a sandbox uses now.
type Usage struct {
	CPUSeconds float64 `json:"cpu_seconds" jsonschema:"CPU time since it booted"`
	Memory     string  `json:"memory"`
	PIDs       int     `json:"pids"`
	Disk       string  `json:"disk"`
}

// LimitsInput is limits_set's arguments: what is left out keeps its value.
type LimitsInput struct {
	Name   string   `json:"name" jsonschema:"the sandbox's name"`
	CPUs   *float64 `json:"cpus,omitempty" jsonschema:"CPU share such as 0.5 or 2"`
	Memory *string  `json:"memory,omitempty" jsonschema:"memory limit such as 512M or 2G"`
	PIDs   *int     `json:"pids,omitempty" jsonschema:"the most processes; 0 lifts the limit"`
	Disk   *string  `json:"disk,omitempty" jsonschema:"cap on its files such as 10G; 0 lifts the cap"`
}

// IdlePolicy is what den does with a sandbox nobody uses, and the
// checkpoints it keeps. Durations read like 90s, 15m or 2h; 0 is never.
type IdlePolicy struct {
	Name             string `json:"name" jsonschema:"the sandbox's name"`
	PauseAfter       string `json:"pause_after" jsonschema:"freeze it in RAM after this long idle"`
	HibernateAfter   string `json:"hibernate_after" jsonschema:"save it to disk and free its RAM after this long idle"`
	StopAfter        string `json:"stop_after" jsonschema:"stop it after this long idle: its processes end, its files stay"`
	TTL              string `json:"ttl" jsonschema:"remove it once it has run this long in all (paused and hibernated time not counted)"`
	BackgroundActive bool   `json:"background_active" jsonschema:"processes still running count as use, not only calls"`
	WakeOnBoot       bool   `json:"wake_on_boot" jsonschema:"woken as soon as den is back after a host shutdown hibernated it, not on its next use"`
	KeepLast         int    `json:"keep_last" jsonschema:"the most manual checkpoints kept; 0: all"`
	MaxAge           string `json:"max_age" jsonschema:"manual checkpoints older than this are removed; 0: none are"`
	RunningFor       string `json:"running_for" jsonschema:"how long it has run in all, against the ttl"`
	Next             string `json:"next,omitempty" jsonschema:"what the policy does next, and when, unless it is used before"`
}

// IdlePolicyInput is idle_policy_set's arguments: what is left out keeps
// its value.
type IdlePolicyInput struct {
	Name             string  `json:"name" jsonschema:"the sandbox's name"`
	PauseAfter       *string `json:"pause_after,omitempty" jsonschema:"a duration such as 5m; 0 never pauses"`
	HibernateAfter   *string `json:"hibernate_after,omitempty" jsonschema:"a duration such as 1h; 0 never hibernates"`
	StopAfter        *string `json:"stop_after,omitempty" jsonschema:"a duration such as 2h; 0 never stops"`
	TTL              *string `json:"ttl,omitempty" jsonschema:"a duration such as 24h; 0 keeps it until removed"`
	BackgroundActive *bool   `json:"background_active,omitempty" jsonschema:"count processes still running as use"`
	WakeOnBoot       *bool   `json:"wake_on_boot,omitempty" jsonschema:"wake it as soon as den is back after a host shutdown hibernated it"`
	KeepLast         *int    `json:"keep_last,omitempty" jsonschema:"keep at most this many manual checkpoints; 0 keeps all"`
	MaxAge           *string `json:"max_age,omitempty" jsonschema:"remove manual checkpoints older than this, such as 168h; 0 keeps them"`
}

func networkOf(sb *api.Sandbox) Network {
	return Network{Name: sb.Name, Mode: sb.Network.Mode, Allow: sb.Network.Allow}
}

func limitsOf(sb *api.Sandbox) SandboxLimits {
	out := SandboxLimits{Name: sb.Name, CPUs: sb.CPUs, Memory: units.BytesSize(float64(sb.MemoryBytes)), PIDs: sb.PIDs, Disk: "0"}
	if sb.DiskBytes > 0 {
		out.Disk = units.BytesSize(float64(sb.DiskBytes))
	}
	if u := sb.Usage; u != nil {
		out.Usage = &Usage{CPUSeconds: u.CPUSeconds, Memory: units.BytesSize(float64(u.MemoryBytes)), PIDs: u.PIDs,
			Disk: units.BytesSize(float64(u.DiskBytes))}
	}
	return out
}

func idlePolicyOf(sb *api.Sandbox) IdlePolicy {
	p := sb.Policy
	str := func(s *string) string {
		if s == nil || *s == "" {
			return "0"
		}
		return *s
	}
	out := IdlePolicy{
		Name: sb.Name, PauseAfter: str(p.PauseAfter), HibernateAfter: str(p.HibernateAfter), StopAfter: str(p.StopAfter),
		TTL: str(p.TTL), MaxAge: str(p.MaxAge), RunningFor: sb.RunningFor,
		BackgroundActive: p.BackgroundActive != nil && *p.BackgroundActive,
		WakeOnBoot:       p.WakeOnBoot != nil && *p.WakeOnBoot,
	}
	if p.KeepLast != nil {
		out.KeepLast = *p.KeepLast
	}
	out.Next = nextOf(sb)
	return out
}

// settingTools are the tools that read and change a sandbox's settings:
// each pair reads with GET of the sandbox and changes with the API's own
// verb, so both answer the same shape.
func (s *server) settingTools(srv *mcp.Server) {
	readSandbox(s, srv, &mcp.Tool{
		Name:        "network_get",
		Title:       "Read a sandbox's network policy",
		Description: "Show what a sandbox may reach: nothing, only some destinations, or the internet.",
		Annotations: readOnly(),
	}, networkOf)

	add(s, srv, &mcp.Tool{
		Name:  "network_set",
		Title: "Change a sandbox's network policy",
		Description: "Replace what a sandbox may reach; a running or paused sandbox gets it at once, its processes keep running. " +
			"Give mode none or open, or allow with the only destinations it may reach.",
		Annotations: changes(false, true),
	}, func(ctx context.Context, c *client.Client, _ *mcp.CallToolRequest, in NetworkInput) (Network, error) {
		p := api.NetworkPolicy{Mode: in.Mode, Allow: in.Allow}
		switch {
		case len(in.Allow) > 0 && in.Mode != "" && in.Mode != api.NetworkAllow:
			return Network{}, invalid("mode %q and allow rules together: give allow alone for a restricted sandbox, or mode alone", in.Mode)
		case len(in.Allow) > 0:
			p.Mode = api.NetworkAllow
		case in.Mode == "":
			return Network{}, invalid("no policy: give mode none or open, or allow with the destinations it may reach")
		}
		sb, err := c.SetNetwork(ctx, in.Name, p)
		if err != nil {
			return Network{}, err
		}
		return networkOf(sb), nil
	})

	readSandbox(s, srv, &mcp.Tool{
		Name:        "limits_get",
		Title:       "Read a sandbox's limits",
		Description: "Show a sandbox's CPU, memory, process and disk limits, and what it uses of them now.",
		Annotations: readOnly(),
	}, limitsOf)

	add(s, srv, &mcp.Tool{
		Name:        "limits_set",
		Title:       "Change a sandbox's limits",
		Description: "Change a sandbox's CPU, memory, process or disk limits, at once on a live sandbox; what is left out keeps its value.",
		Annotations: changes(false, true),
	}, func(ctx context.Context, c *client.Client, _ *mcp.CallToolRequest, in LimitsInput) (SandboxLimits, error) {
		if in.CPUs == nil && in.Memory == nil && in.PIDs == nil && in.Disk == nil {
			return SandboxLimits{}, invalid("no limit given: give cpus, memory, pids or disk")
		}
		sb, err := c.SetLimits(ctx, in.Name, api.LimitsRequest{CPUs: in.CPUs, Memory: in.Memory, PIDs: in.PIDs, Disk: in.Disk})
		if err != nil {
			return SandboxLimits{}, err
		}
		return limitsOf(sb), nil
	})

	readSandbox(s, srv, &mcp.Tool{
		Name:        "idle_policy_get",
		Title:       "Read a sandbox's idle policy",
		Description: "Show when an idle sandbox is paused, hibernated, stopped or removed, how many checkpoints it keeps, and what happens next.",
		Annotations: readOnly(),
	}, idlePolicyOf)

	add(s, srv, &mcp.Tool{
		Name:  "idle_policy_set",
		Title: "Change a sandbox's idle policy",
		Description: "Change when an idle sandbox is paused, hibernated, stopped (stop_after: its processes end, files stay) or removed (ttl), " +
			"whether it wakes when den is back after a host shutdown, and how many checkpoints it keeps. What is left out keeps its value; a duration of 0 turns that step off.",
		Annotations: changes(false, true),
	}, func(ctx context.Context, c *client.Client, _ *mcp.CallToolRequest, in IdlePolicyInput) (IdlePolicy, error) {
		p := api.Policy{PauseAfter: in.PauseAfter, HibernateAfter: in.HibernateAfter, StopAfter: in.StopAfter, TTL: in.TTL,
			BackgroundActive: in.BackgroundActive, WakeOnBoot: in.WakeOnBoot, KeepLast: in.KeepLast, MaxAge: in.MaxAge}
		if p == (api.Policy{}) {
			return IdlePolicy{}, invalid("nothing to change: give pause_after, hibernate_after, stop_after, ttl, background_active, wake_on_boot, keep_last or max_age")
		}
		sb, err := c.SetPolicy(ctx, in.Name, p)
		if err != nil {
			return IdlePolicy{}, err
		}
		return idlePolicyOf(sb), nil
	})
}

// readSandbox registers a read-only tool that answers what view shows of
// a sandbox's record.
func readSandbox[Out any](s *server, srv *mcp.Server, t *mcp.Tool, view func(*api.Sandbox) Out) {
	sandboxTool(s, srv, t, func(c *client.Client) func(context.Context, string) (*api.Sandbox, error) { return c.GetSandbox }, view)
}
