package mcpserver

import (
	"context"
	"errors"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

// CheckpointNode is a checkpoint in its sandbox's tree.
type CheckpointNode struct {
	Checkpoint
	Children []string `json:"children" jsonschema:"the ids of the checkpoints taken after restoring or continuing from this one"`
	Bytes    int64    `json:"bytes" jsonschema:"its memory image and files"`
	NeededBy []string `json:"needed_by,omitempty" jsonschema:"sandboxes that depend on it, which keep it from being deleted"`
}

// CheckpointTree is checkpoint_list's result.
type CheckpointTree struct {
	Name        string           `json:"name"`
	Head        string           `json:"head,omitempty" jsonschema:"its newest checkpoint: the parent of its next one"`
	Roots       []string         `json:"roots" jsonschema:"the checkpoints with no parent in the list: where the tree starts"`
	Checkpoints []CheckpointNode `json:"checkpoints" jsonschema:"oldest first, each naming its parent and children"`
}

// CheckpointRef names a checkpoint of a sandbox.
type CheckpointRef struct {
	Name       string `json:"name" jsonschema:"the sandbox's name"`
	Checkpoint string `json:"checkpoint" jsonschema:"the checkpoint's id or label"`
}

// CheckpointDeleted is checkpoint_delete's result.
type CheckpointDeleted struct {
	Name    string `json:"name"`
	Deleted string `json:"deleted"`
}

// checkpointTree links checkpoints, oldest first, to their children.
func checkpointTree(name, head string, cks []api.Checkpoint) CheckpointTree {
	out := CheckpointTree{Name: name, Head: head, Roots: []string{}, Checkpoints: []CheckpointNode{}}
	at := make(map[string]int, len(cks))
	for i := range cks {
		at[cks[i].ID] = i
		out.Checkpoints = append(out.Checkpoints, CheckpointNode{Checkpoint: checkpointOf(&cks[i]), Children: []string{},
			Bytes: cks[i].MemoryBytes + cks[i].FilesBytes, NeededBy: cks[i].NeededBy})
	}
	for i, ck := range cks {
		if p, ok := at[ck.Parent]; ok && ck.Parent != ck.ID {
			out.Checkpoints[p].Children = append(out.Checkpoints[p].Children, ck.ID)
		} else {
			out.Roots = append(out.Roots, cks[i].ID)
		}
	}
	return out
}

// RunsInput is run_list's arguments.
type RunsInput struct {
	Name  string `json:"name" jsonschema:"the sandbox's name"`
	Limit int    `json:"limit,omitempty" jsonschema:"the most runs to list, newest first (default: den's choice)"`
}

// RunSummary is one command a sandbox ran.
type RunSummary struct {
	RunID       string     `json:"run_id" jsonschema:"for run_output and run_kill"`
	Argv        []string   `json:"argv"`
	Status      string     `json:"status" jsonschema:"running, exited, killed, timed_out or lost"`
	ExitCode    *int       `json:"exit_code,omitempty"`
	Signal      string     `json:"signal,omitempty"`
	LimitHit    string     `json:"limit_hit,omitempty"`
	Background  bool       `json:"background" jsonschema:"started with background=true (detached)"`
	StartedAt   time.Time  `json:"started_at"`
	EndedAt     *time.Time `json:"ended_at,omitempty"`
	StdoutBytes int64      `json:"stdout_bytes"`
	StderrBytes int64      `json:"stderr_bytes"`
}

// RunList is run_list's result.
type RunList struct {
	Name string       `json:"name"`
	Runs []RunSummary `json:"runs" jsonschema:"newest first"`
}

// EventsInput is sandbox_events' arguments.
type EventsInput struct {
	Name  string  `json:"name,omitempty" jsonschema:"only this sandbox's events (default: every sandbox you can use)"`
	After string  `json:"after,omitempty" jsonschema:"the cursor a previous call returned: read the events after it (default: the newest events den keeps)"`
	Limit int     `json:"limit,omitempty" jsonschema:"the most events to return (default 100, most 1000)"`
	Wait  float64 `json:"wait_seconds,omitempty" jsonschema:"when there is nothing new, wait up to this many seconds for an event (default 0, most 60)"`
}

// Event is one thing that happened to a sandbox.
type Event struct {
	ID         string    `json:"id,omitempty" jsonschema:"none on a gap"`
	Time       time.Time `json:"time"`
	Type       string    `json:"type" jsonschema:"a state change (created, paused, hibernated, resumed, stopped, ...), run.started, run.ended, limit.hit, policy.action, or gap: events before it may be missing"`
	Sandbox    string    `json:"sandbox,omitempty"`
	From       string    `json:"from,omitempty"`
	To         string    `json:"to,omitempty"`
	Generation int64     `json:"generation,omitempty"`
	Message    string    `json:"message,omitempty"`
	RunID      string    `json:"run_id,omitempty"`
	RunStatus  string    `json:"run_status,omitempty"`
	ExitCode   *int      `json:"exit_code,omitempty"`
	LimitHit   string    `json:"limit_hit,omitempty"`
}

// Events is sandbox_events' result.
type Events struct {
	Events []Event `json:"events" jsonschema:"oldest first"`
	Cursor string  `json:"cursor" jsonschema:"give it as after to read what happens next"`
	More   bool    `json:"more,omitempty" jsonschema:"more events wait after these: call again with after set to cursor"`
}

const (
	defaultEvents = 100
	maxEvents     = 1000
	maxEventWait  = 60 * time.Second
)

func (s *server) historyTools(srv *mcp.Server) {
	add(s, srv, &mcp.Tool{
		Name:  "checkpoint_list",
		Title: "List a sandbox's checkpoints",
		Description: "List a sandbox's checkpoints as a tree: each names its parent and children, and restoring one starts a new branch. " +
			"head is the newest, the parent of the next checkpoint.",
		Annotations: readOnly(),
	}, func(ctx context.Context, c *client.Client, _ *mcp.CallToolRequest, in SandboxRef) (CheckpointTree, error) {
		sb, err := c.GetSandbox(ctx, in.Name)
		if err != nil {
			return CheckpointTree{}, err
		}
		cks, err := c.Checkpoints(ctx, in.Name)
		if err != nil {
			return CheckpointTree{}, err
		}
		return checkpointTree(in.Name, sb.Head, cks), nil
	})

	add(s, srv, &mcp.Tool{
		Name:        "checkpoint_delete",
		Title:       "Delete a checkpoint",
		Description: "Delete a checkpoint of a sandbox for good. One a sandbox depends on (needed_by) cannot be deleted.",
		Annotations: changes(true, true),
	}, func(ctx context.Context, c *client.Client, _ *mcp.CallToolRequest, in CheckpointRef) (CheckpointDeleted, error) {
		if err := c.RemoveCheckpoint(ctx, in.Name, in.Checkpoint); err != nil {
			return CheckpointDeleted{}, err
		}
		return CheckpointDeleted{Name: in.Name, Deleted: in.Checkpoint}, nil
	})

	add(s, srv, &mcp.Tool{
		Name:        "run_list",
		Title:       "List a sandbox's commands",
		Description: "List the commands a sandbox ran or runs, newest first, with how each ended; run_output reads one's output.",
		Annotations: readOnly(),
	}, func(ctx context.Context, c *client.Client, _ *mcp.CallToolRequest, in RunsInput) (RunList, error) {
		if in.Limit < 0 {
			return RunList{}, invalid("limit is %d: give a positive number, or leave it out", in.Limit)
		}
		runs, err := c.Runs(ctx, in.Name, in.Limit)
		if err != nil {
			return RunList{}, err
		}
		out := RunList{Name: in.Name, Runs: []RunSummary{}}
		for _, r := range runs {
			out.Runs = append(out.Runs, RunSummary{
				RunID: r.ID, Argv: r.Argv, Status: r.Status, ExitCode: r.ExitCode, Signal: r.Signal, LimitHit: r.LimitHit,
				Background: r.Detached, StartedAt: r.StartedAt, EndedAt: r.EndedAt, StdoutBytes: r.StdoutSize, StderrBytes: r.StderrSize,
			})
		}
		return out, nil
	})

	add(s, srv, &mcp.Tool{
		Name:  "sandbox_events",
		Title: "Read what happened to sandboxes",
		Description: "Read recent events of a sandbox (or of all yours): state changes, commands started and ended, limits hit, idle steps. " +
			"A tool call returns once, so this is a bounded read, not a stream: it returns up to limit events and a cursor; " +
			"call again with after=cursor for what happened since, and wait_seconds to wait for the next event. " +
			"den keeps the newest few thousand events in memory since it started.",
		Annotations: readOnly(),
	}, s.events)
}

// errEnough ends an event stream once a call has what it came for.
var errEnough = errors.New("enough events")

func (s *server) events(ctx context.Context, c *client.Client, _ *mcp.CallToolRequest, in EventsInput) (Events, error) {
	limit := in.Limit
	switch {
	case limit < 0 || limit > maxEvents:
		return Events{}, invalid("limit is %d: give 1 to %d, or leave it out", limit, maxEvents)
	case in.Wait < 0 || in.Wait > maxEventWait.Seconds():
		return Events{}, invalid("wait_seconds is %v: give 0 to %.0f", in.Wait, maxEventWait.Seconds())
	case limit == 0:
		limit = defaultEvents
	}
	out := Events{Events: []Event{}, Cursor: in.After}
	opts := client.EventsOptions{Sandbox: in.Name, After: in.After}
	newest := in.After == ""
	if newest {
		opts.After = client.EventStartOldest
	}
	keep := func(ev api.StreamEvent) error {
		if len(out.Events) == limit {
			if !newest {
				out.More = true
				return errEnough
			}
			out.Events = out.Events[1:] // the newest limit events
		}
		out.Events = append(out.Events, eventOf(ev))
		if ev.ID != "" {
			out.Cursor = ev.ID
		}
		return nil
	}
	if err := c.StreamEvents(ctx, opts, keep); err != nil && !errors.Is(err, errEnough) {
		return Events{}, err
	}
	if len(out.Events) > 0 || in.Wait == 0 {
		return out, nil
	}
	// Nothing yet: follow from where this read ended until an event
	// comes or the wait is over.
	wctx, cancel := context.WithTimeout(ctx, time.Duration(in.Wait*float64(time.Second)))
	defer cancel()
	opts.After, opts.Follow = out.Cursor, true
	err := c.StreamEvents(wctx, opts, func(ev api.StreamEvent) error {
		_ = keep(ev)
		return errEnough
	})
	if err != nil && !errors.Is(err, errEnough) {
		return Events{}, err
	}
	return out, nil
}

func eventOf(ev api.StreamEvent) Event {
	return Event{
		ID: ev.ID, Time: ev.Time, Type: ev.Type, Sandbox: ev.Sandbox, From: ev.From, To: ev.To, Generation: ev.Generation,
		Message: ev.Message, RunID: ev.RunID, RunStatus: ev.RunStatus, ExitCode: ev.ExitCode, LimitHit: ev.LimitHit,
	}
}
