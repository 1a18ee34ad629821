package mcpserver

import (
	"context"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

// MetricsInput is sandbox_metrics' arguments.
type MetricsInput struct {
	Name    string `json:"name" jsonschema:"the sandbox's name"`
	Minutes int    `json:"minutes,omitempty" jsonschema:"the samples of the last this many minutes (default 5, most 60: den keeps an hour)"`
}

// MetricSample is what a sandbox used at one instant.
type MetricSample struct {
	At               time.Time `json:"at"`
	CPUPercent       float64   `json:"cpu_percent" jsonschema:"CPU use since the sample before, as a share of the CPUs it may use (100: all of them)"`
	CPUs             float64   `json:"cpus"`
	MemoryBytes      int64     `json:"memory_bytes"`
	MemoryLimitBytes int64     `json:"memory_limit_bytes"`
	DiskBytes        int64     `json:"disk_bytes"`
	DiskLimitBytes   int64     `json:"disk_limit_bytes" jsonschema:"0: no cap"`
}

// Metrics is sandbox_metrics' result.
type Metrics struct {
	Name    string         `json:"name"`
	Samples []MetricSample `json:"samples" jsonschema:"oldest first, every few seconds while it ran"`
}

// Process is one process running in a sandbox.
type Process struct {
	PID      int    `json:"pid"`
	PPID     int    `json:"ppid"`
	Name     string `json:"name"`
	Command  string `json:"command" jsonschema:"its arguments, space-separated"`
	State    string `json:"state" jsonschema:"R running, S sleeping, T stopped, Z zombie, ..."`
	RSSBytes int64  `json:"rss_bytes"`
	Secrets  bool   `json:"secrets,omitempty" jsonschema:"may hold a secret in memory: while one runs, the sandbox's memory is not saved"`
}

// Processes is process_list's result.
type Processes struct {
	Name      string    `json:"name"`
	Processes []Process `json:"processes" jsonschema:"by pid, den-init (PID 1) aside"`
}

// HistoryInput is sandbox_history's arguments.
type HistoryInput struct {
	Name  string `json:"name" jsonschema:"the sandbox's name"`
	Limit int    `json:"limit,omitempty" jsonschema:"the most events to return, the newest kept (default 100, most 1000)"`
}

// HistoryEvent is one entry of a sandbox's permanent history.
type HistoryEvent struct {
	Seq        int64     `json:"seq"`
	Time       time.Time `json:"time"`
	Type       string    `json:"type" jsonschema:"created, started, paused, hibernated, stopped, checkpoint, restored, network, limits, policy, lost, error, ..."`
	From       string    `json:"from,omitempty"`
	To         string    `json:"to,omitempty"`
	Generation int64     `json:"generation"`
	Message    string    `json:"message,omitempty"`
}

// History is sandbox_history's result.
type History struct {
	Name   string         `json:"name"`
	Events []HistoryEvent `json:"events" jsonschema:"oldest first"`
	Total  int            `json:"total" jsonschema:"how many events its history holds in all"`
}

// ImageRef names an image.
type ImageRef struct {
	Image string `json:"image" jsonschema:"the image's name, such as busybox"`
}

// Image is a root filesystem sandboxes are created from.
type Image struct {
	Name      string         `json:"name"`
	Version   int            `json:"version" jsonschema:"grows with every build, import or pull of the name"`
	Source    string         `json:"source" jsonschema:"builtin, imported or pulled"`
	Ref       string         `json:"ref,omitempty" jsonschema:"the registry reference it was pulled from"`
	Digest    string         `json:"digest,omitempty"`
	SizeBytes int64          `json:"size_bytes"`
	Env       []string       `json:"env,omitempty"`
	Cwd       string         `json:"cwd,omitempty"`
	User      string         `json:"user,omitempty"`
	CreatedAt time.Time      `json:"created_at"`
	Warm      int            `json:"warm,omitempty" jsonschema:"instances booted ahead, so that a create from it is quick"`
	Older     []ImageVersion `json:"older,omitempty" jsonschema:"older versions kept for the sandboxes and checkpoints made from them, oldest first"`
}

// ImageVersion is an older version of an image, kept.
type ImageVersion struct {
	Version   int       `json:"version"`
	Source    string    `json:"source"`
	Ref       string    `json:"ref,omitempty"`
	Digest    string    `json:"digest,omitempty"`
	SizeBytes int64     `json:"size_bytes"`
	CreatedAt time.Time `json:"created_at"`
}

// Images is image_list's result.
type Images struct {
	Images []Image `json:"images"`
}

// OwnQuota is quota_get's result.
type OwnQuota struct {
	Owner        string    `json:"owner" jsonschema:"your owner identity"`
	Default      bool      `json:"default" jsonschema:"the quota is den's default: no admin set yours"`
	Quota        api.Quota `json:"quota" jsonschema:"the most you may hold; 0: no limit"`
	Use          api.Quota `json:"use" jsonschema:"what you hold now"`
	AllowPrivate []string  `json:"allow_private" jsonschema:"private ranges your network rules may name beyond den's own"`
}

const (
	defaultMetricMinutes = 5
	maxMetricMinutes     = 60
	defaultHistory       = 100
	maxHistory           = 1000
)

// observeTools read what a sandbox does and did, the images it can be
// made from, and what the caller may still use.
func (s *server) observeTools(srv *mcp.Server) {
	add(s, srv, &mcp.Tool{
		Name:        "sandbox_metrics",
		Title:       "Read a sandbox's resource use",
		Description: "Read the CPU, memory and disk a sandbox used over the last minutes, sampled every few seconds while it ran.",
		Annotations: readOnly(),
	}, func(ctx context.Context, c *client.Client, _ *mcp.CallToolRequest, in MetricsInput) (Metrics, error) {
		minutes := in.Minutes
		switch {
		case minutes < 0 || minutes > maxMetricMinutes:
			return Metrics{}, invalid("minutes is %d: give 1 to %d, or leave it out", minutes, maxMetricMinutes)
		case minutes == 0:
			minutes = defaultMetricMinutes
		}
		samples, err := c.Metrics(ctx, in.Name, time.Now().Add(-time.Duration(minutes)*time.Minute), time.Time{})
		if err != nil {
			return Metrics{}, err
		}
		out := Metrics{Name: in.Name, Samples: []MetricSample{}}
		for _, m := range samples {
			out.Samples = append(out.Samples, MetricSample{At: m.At, CPUPercent: m.CPUPercent, CPUs: m.CPUs,
				MemoryBytes: m.MemoryBytes, MemoryLimitBytes: m.MemoryLimit, DiskBytes: m.DiskBytes, DiskLimitBytes: m.DiskLimit})
		}
		return out, nil
	})

	add(s, srv, &mcp.Tool{
		Name:  "process_list",
		Title: "List a sandbox's processes",
		Description: "List every process running in a sandbox, those commands left in the background included, with memory and state " +
			"(den top). A sleeping sandbox is woken to answer.",
		Annotations: readOnly(),
	}, func(ctx context.Context, c *client.Client, _ *mcp.CallToolRequest, in SandboxRef) (Processes, error) {
		procs, err := c.Processes(ctx, in.Name)
		if err != nil {
			return Processes{}, err
		}
		out := Processes{Name: in.Name, Processes: []Process{}}
		for _, p := range procs {
			out.Processes = append(out.Processes, Process{PID: p.PID, PPID: p.PPID, Name: p.Name, Command: p.Command,
				State: p.State, RSSBytes: p.RSSBytes, Secrets: p.Secrets})
		}
		return out, nil
	})

	add(s, srv, &mcp.Tool{
		Name:  "sandbox_history",
		Title: "Read a sandbox's history",
		Description: "Read a sandbox's permanent history since it was created: state changes, checkpoints, restores and setting changes, " +
			"kept as long as the sandbox is. sandbox_events reads recent events of all kinds, commands included.",
		Annotations: readOnly(),
	}, func(ctx context.Context, c *client.Client, _ *mcp.CallToolRequest, in HistoryInput) (History, error) {
		limit := in.Limit
		switch {
		case limit < 0 || limit > maxHistory:
			return History{}, invalid("limit is %d: give 1 to %d, or leave it out", limit, maxHistory)
		case limit == 0:
			limit = defaultHistory
		}
		evs, err := c.Events(ctx, in.Name)
		if err != nil {
			return History{}, err
		}
		out := History{Name: in.Name, Events: []HistoryEvent{}, Total: len(evs)}
		for _, e := range evs[max(0, len(evs)-limit):] {
			out.Events = append(out.Events, HistoryEvent{Seq: e.Seq, Time: e.Time, Type: e.Type, From: e.From, To: e.To,
				Generation: e.Generation, Message: e.Message})
		}
		return out, nil
	})

	s.imageTools(srv)

	add(s, srv, &mcp.Tool{
		Name:        "quota_get",
		Title:       "Read your quota",
		Description: "Show the most sandboxes, memory, CPUs, disk and checkpoints you may hold, and what you hold now.",
		Annotations: readOnly(),
	}, func(ctx context.Context, c *client.Client, _ *mcp.CallToolRequest, _ struct{}) (OwnQuota, error) {
		o, err := c.Owner(ctx, client.SelfOwner)
		if err != nil {
			return OwnQuota{}, err
		}
		allow := o.AllowPrivate
		if allow == nil {
			allow = []string{}
		}
		return OwnQuota{Owner: o.ID, Default: o.Default, Quota: o.Quota, Use: o.Use, AllowPrivate: allow}, nil
	})
}

func (s *server) imageTools(srv *mcp.Server) {
	add(s, srv, &mcp.Tool{
		Name:        "image_list",
		Title:       "List images",
		Description: "List the images sandboxes can be created from (sandbox_create's image), newest version of each.",
		Annotations: readOnly(),
	}, func(ctx context.Context, c *client.Client, _ *mcp.CallToolRequest, _ struct{}) (Images, error) {
		imgs, err := c.ListImages(ctx)
		if err != nil {
			return Images{}, err
		}
		out := Images{Images: []Image{}}
		for i := range imgs {
			out.Images = append(out.Images, imageOf(&imgs[i]))
		}
		return out, nil
	})

	add(s, srv, &mcp.Tool{
		Name:        "image_get",
		Title:       "Read an image",
		Description: "Show an image: its source, size, environment, working directory, user, and the older versions kept.",
		Annotations: readOnly(),
	}, func(ctx context.Context, c *client.Client, _ *mcp.CallToolRequest, in ImageRef) (Image, error) {
		img, err := c.GetImage(ctx, in.Image)
		if err != nil {
			return Image{}, err
		}
		return imageOf(img), nil
	})
}

func imageOf(img *api.Image) Image {
	out := Image{Name: img.Name, Version: img.Version, Source: img.Source, Ref: img.Ref, Digest: img.Digest, SizeBytes: img.SizeBytes,
		Env: img.Env, Cwd: img.Cwd, User: img.User, CreatedAt: img.CreatedAt}
	if img.Warm != nil {
		out.Warm = img.Warm.Ready
	}
	for i := range img.Older {
		o := img.Older[i]
		out.Older = append(out.Older, ImageVersion{Version: o.Version, Source: o.Source, Ref: o.Ref, Digest: o.Digest,
			SizeBytes: o.SizeBytes, CreatedAt: o.CreatedAt})
	}
	return out
}
