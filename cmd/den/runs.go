package main

import (
	"context"
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
		follow bool
		from   int64
		stream string
	)
	cmd := &cobra.Command{
		Use:   "logs NAME RUN",
		Short: "Print the output of a run",
		Long: `Print what a run wrote: its stdout to den's stdout and its stderr to den's
stderr. With -f, keep printing as the run writes, until it ends. --from skips
the first OFFSET bytes of each stream.`,
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
			return a.copyLogs(cmd.Context(), c, args[0], args[1], streams, from, follow)
		},
	}
	f := cmd.Flags()
	f.BoolVarP(&follow, "follow", "f", false, "keep printing output until the run ends")
	f.Int64Var(&from, "from", 0, "start at this byte offset of each stream")
	f.StringVar(&stream, "stream", "", "only this stream: stdout or stderr (default both)")
	return cmd
}

// copyLogs copies the given streams of a run to den's stdout and stderr,
// concurrently.
func (a *app) copyLogs(ctx context.Context, c *client.Client, name, run string, streams []string, from int64, follow bool) error {
	g, ctx := errgroup.WithContext(ctx)
	for _, s := range streams {
		w := a.stdout
		if s == api.StreamStderr {
			w = a.stderr
		}
		g.Go(func() error {
			rc, err := c.Logs(ctx, name, run, s, from, follow)
			if err != nil {
				return err
			}
			defer rc.Close()
			if _, err := io.Copy(w, rc); err != nil {
				return fmt.Errorf("reading the %s of run %s: %w", s, run, err)
			}
			return nil
		})
	}
	return g.Wait()
}
