package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

func (a *app) runsCommand() *cobra.Command {
	var (
		limit   int
		noTrunc bool
	)
	cmd := &cobra.Command{
		Use:   "runs NAME",
		Short: "List the commands run in a sandbox, newest first",
		Example: `  den runs web
  den runs web --limit 100 --no-trunc
  den runs web --json | jq '.[0].exit_code'`,
		Args: args("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			runs, err := c.Runs(cmd.Context(), args[0], limit)
			if err != nil {
				return err
			}
			return printList(a, runs, func() error { return renderRuns(a.stdout, runs, time.Now(), !noTrunc) })
		},
	}
	cmd.Flags().IntVarP(&limit, "limit", "n", 20, "show at most this many runs")
	cmd.Flags().BoolVar(&noTrunc, "no-trunc", false, "show whole commands")
	return cmd
}

func (a *app) logsCommand() *cobra.Command {
	var (
		follow, noWake bool
		from           int64
		stream         string
	)
	cmd := &cobra.Command{
		Use:   "logs NAME RUN",
		Short: "Print the output of a run",
		Long: `Print what a run wrote: its stdout to den's stdout and its stderr to den's
stderr. With -f, keep printing as the run writes until it ends, then exit
with the run's own status (as den exec does); following a run of a paused or
hibernated sandbox wakes it, unless --no-wake. A follow that stops before the
run ends (the sandbox was put to sleep, the connection to dend was lost) is
an error that says the offset to resume from. --from skips the first OFFSET
bytes of each stream.`,
		Example: `  den logs web r-7f3a
  den logs web r-7f3a -f
  den logs web r-7f3a --stream stderr --from 1024`,
		Args: args("NAME", "RUN"),
		RunE: func(cmd *cobra.Command, args []string) error {
			var streams []string
			switch stream {
			case "":
				streams = []string{api.StreamStdout, api.StreamStderr}
			case api.StreamStdout, api.StreamStderr:
				streams = []string{stream}
			default:
				return usagef("use --stream stdout or --stream stderr", "unknown stream %q", stream)
			}
			if from < 0 {
				return usagef("give a byte offset of 0 or more", "negative --from %d", from)
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			return a.copyLogs(cmd.Context(), c, args[0], args[1], streams, from, follow, !noWake)
		},
	}
	f := cmd.Flags()
	f.BoolVarP(&follow, "follow", "f", false, "keep printing output until the run ends; den exits with the run's status")
	f.BoolVar(&noWake, "no-wake", false, "with -f, wait for a sleeping sandbox to wake instead of waking it")
	f.Int64Var(&from, "from", 0, "start at this byte offset of each stream")
	f.StringVar(&stream, "stream", "", "only this stream: stdout or stderr (default both)")
	return cmd
}

// copyLogs copies the given streams of a run to den's stdout and stderr,
// concurrently. Following, it returns once the run ended, with the run's
// exit status as den's, or with an error that says where to resume.
func (a *app) copyLogs(ctx context.Context, c *client.Client, name, run string, streams []string, from int64, follow, wake bool) error {
	if follow && !wake {
		if sb, err := c.GetSandbox(ctx, name); err == nil && (sb.State == api.StatePaused || sb.State == api.StateHibernated) {
			fmt.Fprintf(a.stderr, "den: sandbox %s is %s: waiting for it to wake (leave out --no-wake to wake it)\n", name, sb.State)
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	for _, s := range streams {
		w := a.stdout
		if s == api.StreamStderr {
			w = a.stderr
		}
		g.Go(func() error {
			var rc io.ReadCloser
			var err error
			if follow {
				rc, err = c.FollowLogs(gctx, name, run, s, from, wake)
			} else {
				rc, err = c.Logs(gctx, name, run, s, from, false)
			}
			if err != nil {
				return err
			}
			defer rc.Close()
			if _, err := io.Copy(w, rc); err != nil {
				var fe *client.FollowError
				if errors.As(err, &fe) {
					return withHint(err, fmt.Sprintf("take it up again with `den logs %s %s -f --stream %s --from %d`", name, run, s, fe.Offset))
				}
				return fmt.Errorf("reading the %s of run %s: %w", s, run, err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil || !follow {
		return err
	}
	r, err := c.GetRun(ctx, name, run)
	if err != nil {
		return err
	}
	return a.runResult(ctx, c, name, r)
}
