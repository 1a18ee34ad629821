package lifecycle

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
	"github.com/den-dev/den/cmd/den/internal/cli"
)

func (a *app) eventsCommand() *cobra.Command {
	var opts client.EventsOptions
	cmd := &cobra.Command{
		Use:   "events",
		Short: "Show what happens to sandboxes: state changes, runs, limits, idle steps",
		Long: `Show the events of dend's sandboxes: state changes (created, paused,
hibernated, resumed, ...), runs started and ended, limits a run ran into and
the steps the idle policy took. Without -f it prints the events dend still
keeps (its newest 4096, in memory, since it started) and exits; with -f it
follows them as they happen, and picks up where it was if the connection
drops. An owner token sees only its own sandboxes' events. In a fleet, any
node shows the events of every node's sandboxes.

Each event has an id; --after ID resumes after it, on any node of a fleet.
A "gap" line says events before it may be missing (dend restarted, no longer
keeps them, or a node of the fleet could not be reached); each sandbox's
history (` + "`den inspect`" + `) keeps its state changes for good. With
--json, each event is one line of JSON, with its node in a fleet.`,
		Example: `  den events
  den events -f
  den events -f --sandbox web
  den events -f --after 3f9a01c2.42 --json`,
		Args: cli.Args(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.Client()
			if err != nil {
				return err
			}
			if opts.After == "" && !opts.Follow {
				opts.After = client.EventStartOldest
			}
			enc := json.NewEncoder(a.Stdout)
			return c.StreamEvents(cmd.Context(), opts, func(ev api.StreamEvent) error {
				if a.JSON {
					return enc.Encode(ev)
				}
				return printEvent(a.Stdout, ev)
			})
		},
	}
	f := cmd.Flags()
	f.BoolVarP(&opts.Follow, "follow", "f", false, "keep following events as they happen")
	f.StringVar(&opts.Sandbox, "sandbox", "", "only this sandbox's events (name or id)")
	f.StringVar(&opts.After, "after", "", "start after this event id (as a previous run printed it)")
	return cmd
}

// printEvent writes one event as a line: time, id, sandbox, type, the
// state change if any, and the message.
func printEvent(w io.Writer, ev api.StreamEvent) error {
	when := ev.Time.Local().Format(time.TimeOnly)
	if ev.Type == "gap" {
		_, err := fmt.Fprintf(w, "%s  -  gap  %s\n", when, cli.EscapeControl(ev.Message))
		return err
	}
	what := ev.Type
	if ev.From != "" && ev.To != "" && ev.From != ev.To {
		what += " " + ev.From + "→" + ev.To
	}
	detail := ev.Message
	switch {
	case ev.RunID != "" && ev.Type == "run.ended" && ev.ExitCode != nil:
		detail = fmt.Sprintf("run %s %s (exit %d): %s", ev.RunID, ev.RunStatus, *ev.ExitCode, ev.Message)
	case ev.RunID != "" && ev.Type != "limit.hit":
		detail = fmt.Sprintf("run %s %s: %s", ev.RunID, ev.RunStatus, ev.Message)
	}
	// The message can quote a run's command: shown escaped, as in tables.
	_, err := fmt.Fprintf(w, "%s  %s  %s  %s  %s\n", when, ev.ID, ev.Sandbox, what, cli.EscapeControl(detail))
	return err
}
