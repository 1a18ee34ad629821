package runs

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
	"github.com/den-dev/den/cmd/den/internal/cli"
)

// Exit statuses den exec uses for what is not the command's own status.
const (
	exitTimedOut = 124 // like timeout(1)
	exitSignal   = 128 // plus the signal number, like a shell
)

type execFlags struct {
	detach, stdin, tty bool
	env, labels        []string
	workdir, user      string
	timeout            time.Duration
	outputMax          string
}

func (a *app) execCommand() *cobra.Command {
	var fl execFlags
	cmd := &cobra.Command{
		Use:   "exec NAME [flags] -- CMD [ARG...]",
		Short: "Run a command in a sandbox",
		Long: `Run a command in a sandbox. Its output streams to den's stdout and stderr as it
comes, and den exits with the command's exit status: 128+N if a signal N killed
it, 124 if its --timeout passed (den ends the command itself then). The first
Ctrl-C or SIGTERM is passed on to the command; a second one detaches: den
prints the run's id and exits, and the command goes on.

Every run is recorded: see it later with den runs and den logs.`,
		Example: `  den exec web -- uname -a
  den exec web -w /srv -e DEBUG=1 -- python3 app.py
  echo 'print(6*7)' | den exec -i web -- python3
  den exec -d web -- sh -c 'make > build.log'
  den exec web --timeout 30s -- ./flaky-test
  den exec -d web --label job=nightly -- ./build.sh`,
		Args: func(cmd *cobra.Command, args []string) error {
			if dash := cmd.ArgsLenAtDash(); dash > 1 {
				return cli.Usagef("write den's flags before -- and the command after it: den exec NAME [flags] -- CMD",
					"unexpected argument %q before --", args[1])
			}
			return cli.AtLeast("NAME", "CMD")(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			env, err := cli.ParseKeyValues("--env", fl.env, a.Getenv)
			if err != nil {
				return err
			}
			labels, err := cli.ParseKeyValues("--label", fl.labels, nil)
			if err != nil {
				return err
			}
			req := api.ExecRequest{
				Argv:    args[1:],
				Env:     env,
				Labels:  labels,
				Cwd:     fl.workdir,
				User:    fl.user,
				TTY:     fl.tty,
				Timeout: api.Duration(fl.timeout),

				OutputMax: fl.outputMax,
			}
			c, err := a.Client()
			if err != nil {
				return err
			}
			if fl.detach {
				return a.execDetached(cmd.Context(), c, args[0], req)
			}
			return a.attach(cmd.Context(), c, args[0], req, fl.stdin)
		},
	}
	f := cmd.Flags()
	f.BoolVarP(&fl.detach, "detach", "d", false, "run in the background and print the run id")
	f.BoolVarP(&fl.stdin, "interactive", "i", false, "send den's stdin to the command")
	f.BoolVarP(&fl.tty, "tty", "t", false, "give the command a terminal")
	f.StringArrayVarP(&fl.env, "env", "e", nil, "environment variable K=V (K alone takes it from here); repeatable")
	f.StringArrayVar(&fl.labels, "label", nil, "label the run K=V, shown by den runs; repeatable")
	f.StringVarP(&fl.workdir, "workdir", "w", "", "working directory inside the sandbox (absolute)")
	f.StringVarP(&fl.user, "user", "u", "", "user to run as: name, uid or uid:gid (default root)")
	f.DurationVar(&fl.timeout, "timeout", 0, "kill the command and its children after this long, e.g. 30s (default none)")
	f.StringVar(&fl.outputMax, "output-max", "", "keep at most this much of each output stream, its head and tail, e.g. 1M (default and most: dend's --run-output-max)")
	return cmd
}

func (a *app) execDetached(ctx context.Context, c *client.Client, name string, req api.ExecRequest) error {
	if req.TTY {
		return cli.Usagef("drop -t, or -d to stay attached", "a detached command cannot have a terminal")
	}
	run, err := c.ExecDetached(ctx, name, req)
	if err != nil {
		return err
	}
	if a.JSON {
		return cli.PrintJSON(a.Stdout, run)
	}
	fmt.Fprintln(a.Stdout, run.ID)
	return nil
}

// attach runs req attached to den's streams and turns the run's end into
// den's exit status.
func (a *app) attach(ctx context.Context, c *client.Client, name string, req api.ExecRequest, withStdin bool) error {
	eio := client.ExecIO{Stdout: a.Stdout, Stderr: a.Stderr}
	if withStdin {
		eio.Stdin = a.Stdin
	}
	if req.TTY {
		tty, err := a.openTTY(withStdin)
		if err != nil {
			return err
		}
		defer tty.close()
		req.Rows, req.Cols = tty.rows, tty.cols
		eio.Resize = tty.resize
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var runID syncString
	eio.Started = func(r *api.Run) { runID.set(r.ID) }
	sigs := a.forwardSignals(ctx, cancel)
	eio.Signals = sigs.out
	defer sigs.stop()

	run, err := c.Exec(ctx, name, req, eio)
	if err != nil {
		if sigs.detached() {
			id := runID.get()
			return cli.WithHint(fmt.Errorf("detached from run %s; it keeps running", id),
				fmt.Sprintf("follow it with `den logs %s %s -f`", name, id))
		}
		return err
	}
	return a.runResult(ctx, c, name, run)
}

// runResult turns an ended run of sandbox name into den's exit status.
func (a *app) runResult(ctx context.Context, c *client.Client, name string, run *api.Run) error {
	switch run.Status {
	case api.RunLost:
		return lostRun(ctx, c, name, run)
	case api.RunTimedOut:
		fmt.Fprintf(a.Stderr, "den: run %s timed out and was killed\n", run.ID)
	}
	if code := exitCode(run); code != 0 {
		return &cli.ExitError{Code: code}
	}
	return nil
}

// lostRun explains a run that ended with its sandbox's instance: what
// dend records of the sandbox (its engine died, it was stopped, ...) and
// the way back. dend ends the streams first and settles the sandbox a
// moment later, so a record still showing the run's instance up is asked
// for again, for a little while.
func lostRun(ctx context.Context, c *client.Client, name string, run *api.Run) error {
	err := fmt.Errorf("run %s was lost: its sandbox stopped before the command ended", run.ID)
	hint := fmt.Sprintf("see what happened with `den inspect %s`", name)
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	for {
		sb, gerr := c.GetSandbox(ctx, name)
		switch {
		case gerr != nil || sb.Generation != run.Generation:
			return cli.WithHint(err, hint)
		case sb.State != api.StateRunning && sb.State != api.StatePaused:
			err = fmt.Errorf("run %s was lost: sandbox %s is %s", run.ID, name, sb.State)
			if sb.Reason != "" {
				err = fmt.Errorf("%w: %s", err, sb.Reason)
			}
			return cli.WithHint(err, hint)
		}
		select {
		case <-ctx.Done():
			return cli.WithHint(err, hint)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// exitCode is the status den exec exits with for a run: the command's
// own, 128+N when signal N killed it, 124 when it timed out, 1 when it is
// not known.
func exitCode(run *api.Run) int {
	switch run.Status {
	case api.RunTimedOut:
		return exitTimedOut
	case api.RunKilled:
		if n := signalNumber(run.Signal); n > 0 {
			return exitSignal + n
		}
	case api.RunExited:
		if run.ExitCode == nil {
			return 0
		}
	}
	if run.ExitCode != nil {
		return *run.ExitCode
	}
	return 1
}

// signalNumber reads "KILL", "SIGKILL" or "9"; 0 when unknown.
func signalNumber(s string) int {
	s = strings.ToUpper(strings.TrimSpace(s))
	if n, err := strconv.Atoi(s); err == nil && n > 0 && n < 65 {
		return n
	}
	if !strings.HasPrefix(s, "SIG") {
		s = "SIG" + s
	}
	return int(unix.SignalNum(s))
}

// signalForwarder passes the first SIGINT or SIGTERM on to the command;
// the second detaches instead, so that den never outlives the patience of
// whoever sent them (a `timeout 20 den exec ...` ends too).
type signalForwarder struct {
	out  chan string
	stop func()
	mu   sync.Mutex
	det  bool
}

func (s *signalForwarder) detached() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.det
}

func (a *app) forwardSignals(ctx context.Context, detach context.CancelFunc) *signalForwarder {
	ch := make(chan os.Signal, 4)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
	done := make(chan struct{})
	s := &signalForwarder{out: make(chan string, 4)}
	s.stop = func() {
		signal.Stop(ch)
		close(done)
	}
	go func() {
		received := 0
		for {
			var sig os.Signal
			select {
			case <-done:
				return
			case sig = <-ch:
			}
			if received++; received >= 2 {
				s.mu.Lock()
				s.det = true
				s.mu.Unlock()
				detach()
				return
			}
			name := "TERM"
			if sig == syscall.SIGINT {
				name = "INT"
			}
			select {
			case s.out <- name:
			case <-ctx.Done():
				return
			}
		}
	}()
	return s
}

// syncString is a string set by one goroutine and read by another.
type syncString struct {
	mu sync.Mutex
	s  string
}

func (s *syncString) set(v string) { s.mu.Lock(); s.s = v; s.mu.Unlock() }
func (s *syncString) get() string  { s.mu.Lock(); defer s.mu.Unlock(); return s.s }
