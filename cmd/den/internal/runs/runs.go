package runs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
	"github.com/den-dev/den/cmd/den/internal/cli"
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
		Args: cli.Args("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.Client()
			if err != nil {
				return err
			}
			runs, err := c.Runs(cmd.Context(), args[0], limit)
			if err != nil {
				return err
			}
			return cli.PrintList(a.App, runs, func() error { return renderRuns(a.Stdout, runs, time.Now(), !noTrunc) })
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
		Args: cli.Args("NAME", "RUN"),
		RunE: func(cmd *cobra.Command, args []string) error {
			var streams []string
			switch stream {
			case "":
				streams = []string{api.StreamStdout, api.StreamStderr}
			case api.StreamStdout, api.StreamStderr:
				streams = []string{stream}
			default:
				return cli.Usagef("use --stream stdout or --stream stderr", "unknown stream %q", stream)
			}
			if from < 0 {
				return cli.Usagef("give a byte offset of 0 or more", "negative --from %d", from)
			}
			c, err := a.Client()
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

// CopyLogs is copyLogs for the other groups (den service logs).
func CopyLogs(ctx context.Context, c *cli.App, cl *client.Client, name, run string, streams []string, from int64, follow, wake bool) error {
	return (&app{c}).copyLogs(ctx, cl, name, run, streams, from, follow, wake)
}

// copyLogs copies the given streams of a run to den's stdout and stderr,
// concurrently. Following, it returns once the run ended, with the run's
// exit status as den's, or with an error that says where to resume.
func (a *app) copyLogs(ctx context.Context, c *client.Client, name, run string, streams []string, from int64, follow, wake bool) error {
	if follow && !wake {
		if sb, err := c.GetSandbox(ctx, name); err == nil && (sb.State == api.StatePaused || sb.State == api.StateHibernated) {
			fmt.Fprintf(a.Stderr, "den: sandbox %s is %s: waiting for it to wake (leave out --no-wake to wake it)\n", name, sb.State)
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	var mu sync.Mutex
	var cut []*client.FollowError // the followed streams that stopped short
	for _, s := range streams {
		w := a.Stdout
		if s == api.StreamStderr {
			w = a.Stderr
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
					// The other stream follows on to its own end: a
					// dend that stopped cuts it too, where it stood.
					mu.Lock()
					cut = append(cut, fe)
					mu.Unlock()
					return nil
				}
				return fmt.Errorf("reading the %s of run %s: %w", s, run, err)
			}
			return nil
		})
	}
	err := g.Wait()
	if len(cut) > 0 {
		return followCut(name, run, cut)
	}
	if err != nil || !follow {
		return err
	}
	r, err := c.GetRun(ctx, name, run)
	if err != nil {
		return err
	}
	return a.runResult(ctx, c, name, r)
}

// followCut is the error of a follow whose streams in cut stopped before
// the run ended: why, and the command that takes each up again where it
// stopped; at one offset, one command resumes both.
func followCut(name, run string, cut []*client.FollowError) error {
	sort.Slice(cut, func(i, j int) bool { return cut[i].Stream > cut[j].Stream }) // stdout first
	why := cut[0]
	for _, fe := range cut {
		if !errors.Is(fe.Err, context.Canceled) { // not only ended by the other's stop
			why = fe
			break
		}
	}
	if len(cut) == 1 {
		return cli.WithHint(why, fmt.Sprintf("take it up again with `den logs %s %s -f --stream %s --from %d`", name, run, why.Stream, why.Offset))
	}
	var at []string
	for _, fe := range cut {
		at = append(at, fmt.Sprintf("%s at byte %d", fe.Stream, fe.Offset))
	}
	err := fmt.Errorf("following run %s stopped before the run ended (%s): %w", run, strings.Join(at, ", "), why.Err)
	if cut[0].Offset == cut[1].Offset {
		return cli.WithHint(err, fmt.Sprintf("take it up again with `den logs %s %s -f --from %d`", name, run, cut[0].Offset))
	}
	var cmds []string
	for _, fe := range cut {
		cmds = append(cmds, fmt.Sprintf("`den logs %s %s -f --stream %s --from %d`", name, run, fe.Stream, fe.Offset))
	}
	return cli.WithHint(err, "take them up again with "+strings.Join(cmds, " and "))
}

// maxCommandWidth is how much of a command the runs table shows.
const maxCommandWidth = 60

func renderRuns(w io.Writer, runs []api.Run, now time.Time, trunc bool) error {
	labeled := slices.ContainsFunc(runs, func(r api.Run) bool { return len(r.Labels) > 0 })
	header := []string{"RUN", "STATUS", "EXIT", "STARTED", "DURATION", "COMMAND"}
	if labeled {
		// Before COMMAND, which is the widest and may be cut.
		header = slices.Insert(header, 5, "LABELS")
	}
	t := cli.NewTable(w, header...)
	for _, r := range runs {
		end := now
		if r.EndedAt != nil {
			end = *r.EndedAt
		}
		cmd := shellJoin(r.Argv)
		if trunc && len(cmd) > maxCommandWidth {
			cmd = cmd[:maxCommandWidth-3] + "..."
		}
		cells := []string{r.ID, r.Status, runExit(r), cli.Ago(r.StartedAt, now), cli.ShortDuration(end.Sub(r.StartedAt)), cmd}
		if labeled {
			cells = slices.Insert(cells, 5, labelList(r.Labels))
		}
		t.Row(cells...)
	}
	return t.Flush()
}

// labelList is a LABELS cell: K=V pairs by key, comma-separated, or "-".
func labelList(labels map[string]string) string {
	if len(labels) == 0 {
		return "-"
	}
	pairs := make([]string, 0, len(labels))
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		pairs = append(pairs, k+"="+labels[k])
	}
	return strings.Join(pairs, ",")
}

// runExit is the EXIT column: the code, the signal, or "-" while running.
func runExit(r api.Run) string {
	switch {
	case r.LimitHit == api.LimitMemory:
		return "OOM"
	case r.Signal != "":
		return "SIG" + strings.TrimPrefix(strings.ToUpper(r.Signal), "SIG")
	case r.ExitCode != nil:
		return strconv.Itoa(*r.ExitCode)
	}
	return "-"
}

// shellJoin quotes argv the way a POSIX shell would need it.
func shellJoin(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		if a != "" && strings.IndexFunc(a, needsQuote) < 0 {
			q[i] = a
			continue
		}
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}

func needsQuote(r rune) bool {
	return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,+@%", r))
}
