package mcpserver

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

// ExecInput is sandbox_exec's arguments.
type ExecInput struct {
	Name    string            `json:"name" jsonschema:"the sandbox's name"`
	Command string            `json:"command,omitempty" jsonschema:"a shell command line, run with sh -c"`
	Argv    []string          `json:"argv,omitempty" jsonschema:"instead of command: the program and its arguments, run as they are"`
	Cwd     string            `json:"cwd,omitempty" jsonschema:"working directory (default: the image's)"`
	Env     map[string]string `json:"env,omitempty" jsonschema:"extra environment variables"`
	User    string            `json:"user,omitempty" jsonschema:"user name or uid to run as (default root)"`
	Stdin   string            `json:"stdin,omitempty" jsonschema:"text given to the command on its standard input"`
	Timeout float64           `json:"timeout_seconds,omitempty" jsonschema:"kill the command and everything it started after this many seconds (default: none for background runs, 600 otherwise)"`
	// Background runs return at once with the run's id.
	Background bool `json:"background,omitempty" jsonschema:"start the command and return its run id at once; read its output with run_output"`
	StdinOpen  bool `json:"stdin_open,omitempty" jsonschema:"with background: keep its standard input open (after stdin, if given) for run_stdin to write to"`
}

// StdinInput is run_stdin's arguments.
type StdinInput struct {
	Name  string `json:"name" jsonschema:"the sandbox's name"`
	RunID string `json:"run_id" jsonschema:"a run started with background and stdin_open"`
	Text  string `json:"text,omitempty" jsonschema:"text written to its standard input as it is (add the newline a line needs)"`
	Close bool   `json:"close,omitempty" jsonschema:"close its standard input after text: the command reads end of file"`
}

// StdinSent is run_stdin's result.
type StdinSent struct {
	RunID  string `json:"run_id"`
	Bytes  int    `json:"bytes"`
	Closed bool   `json:"closed"`
}

// RunResult is what a command did: its output's tails, and how it ended.
type RunResult struct {
	RunID    string `json:"run_id" jsonschema:"for run_output and run_kill"`
	Status   string `json:"status" jsonschema:"running, exited, killed, timed_out or lost"`
	ExitCode *int   `json:"exit_code,omitempty"`
	Signal   string `json:"signal,omitempty"`
	LimitHit string `json:"limit_hit,omitempty" jsonschema:"memory or pids when a limit killed it"`
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
	// StdoutBytes and StderrBytes are how much the command wrote in all;
	// offsets for run_output.
	StdoutBytes int64 `json:"stdout_bytes"`
	StderrBytes int64 `json:"stderr_bytes"`
	Truncated   bool  `json:"truncated,omitempty" jsonschema:"only the ends of the output are here; run_output reads the rest"`
}

// OutputInput is run_output's arguments.
type OutputInput struct {
	Name  string  `json:"name" jsonschema:"the sandbox's name"`
	RunID string  `json:"run_id"`
	Wait  float64 `json:"wait_seconds,omitempty" jsonschema:"wait up to this many seconds for the run to end (default 0: answer at once)"`
	// Offsets let a caller page through long output.
	StdoutFrom int64 `json:"stdout_from,omitempty" jsonschema:"read stdout from this byte offset (default: its last part)"`
	StderrFrom int64 `json:"stderr_from,omitempty" jsonschema:"read stderr from this byte offset (default: its last part)"`
}

// KillInput is run_kill's arguments.
type KillInput struct {
	Name   string `json:"name" jsonschema:"the sandbox's name"`
	RunID  string `json:"run_id"`
	Signal string `json:"signal,omitempty" jsonschema:"TERM (default), KILL, INT, HUP or a number"`
}

// defaultTimeout bounds a foreground command whose caller gave none: a
// model waiting on a tool call cannot interrupt it.
const defaultTimeout = 10 * time.Minute

func (s *server) execTools(srv *mcp.Server) {
	add(s, srv, &mcp.Tool{
		Name:  "sandbox_exec",
		Title: "Run a command",
		Description: "Run a command in a sandbox and return its exit code and output (the last part of each stream when long). " +
			"Give command (a shell line) or argv. With background=true it returns a run id at once; the command goes on, and run_output reads it.",
		Annotations: changes(true, false),
	}, s.exec)

	add(s, srv, &mcp.Tool{
		Name:        "run_output",
		Title:       "Read a command's output",
		Description: "Read the output and status of a command started with sandbox_exec, optionally waiting for it to end.",
		Annotations: readOnly(),
	}, s.output)

	add(s, srv, &mcp.Tool{
		Name:  "run_stdin",
		Title: "Write to a command's input",
		Description: "Write text to the standard input of a command started with sandbox_exec background=true and stdin_open=true; " +
			"with close, close it so the command reads end of file. Read what it answers with run_output.",
		Annotations: changes(false, false),
	}, func(ctx context.Context, c *client.Client, _ *mcp.CallToolRequest, in StdinInput) (StdinSent, error) {
		if in.Text == "" && !in.Close {
			return StdinSent{}, invalid("nothing to send: give text, or close=true to close its input")
		}
		if err := c.SendStdin(ctx, in.Name, in.RunID, strings.NewReader(in.Text), in.Close); err != nil {
			return StdinSent{}, err
		}
		return StdinSent{RunID: in.RunID, Bytes: len(in.Text), Closed: in.Close}, nil
	})

	add(s, srv, &mcp.Tool{
		Name:        "run_kill",
		Title:       "Stop a command",
		Description: "Send a signal (TERM by default) to a running command and everything it started.",
		Annotations: changes(true, true),
	}, func(ctx context.Context, c *client.Client, _ *mcp.CallToolRequest, in KillInput) (RunResult, error) {
		sig := in.Signal
		if sig == "" {
			sig = "TERM"
		}
		if err := c.Signal(ctx, in.Name, in.RunID, sig); err != nil {
			return RunResult{}, err
		}
		return s.result(ctx, c, in.Name, in.RunID, 0, 0)
	})
}

func (s *server) exec(ctx context.Context, c *client.Client, req *mcp.CallToolRequest, in ExecInput) (RunResult, error) {
	argv := in.Argv
	switch {
	case in.Command != "" && len(argv) > 0:
		return RunResult{}, invalid("both command and argv given: give command for a shell line, or argv for a program and its arguments")
	case in.Command != "":
		argv = []string{"sh", "-c", in.Command}
	case len(argv) == 0:
		return RunResult{}, invalid("no command: give command (a shell line such as \"ls -l /\") or argv")
	}
	if in.Timeout < 0 {
		return RunResult{}, invalid("timeout_seconds is %v: give a positive number of seconds, or leave it out", in.Timeout)
	}
	timeout := time.Duration(in.Timeout * float64(time.Second))
	if timeout == 0 && !in.Background {
		timeout = defaultTimeout
	}
	er := api.ExecRequest{Argv: argv, Cwd: in.Cwd, Env: in.Env, User: in.User, Timeout: api.Duration(timeout)}
	if in.Background {
		return s.background(ctx, c, in, er)
	}
	if in.StdinOpen {
		return RunResult{}, invalid("stdin_open without background: a command run to its end reads only stdin; add background=true to write to it later with run_stdin")
	}

	stdout, stderr := newTail(s.opts.OutputMax), newTail(s.opts.OutputMax)
	eio := client.ExecIO{Stdout: stdout, Stderr: stderr}
	if in.Stdin != "" {
		er.Stdin = true
		eio.Stdin = strings.NewReader(in.Stdin)
	}
	stop := s.progress(ctx, req, stdout, stderr)
	run, err := c.Exec(ctx, in.Name, er, eio)
	stop()
	if err != nil {
		return RunResult{}, err
	}
	return resultOf(run, stdout, stderr), nil
}

// background starts a detached run and answers its id at once, having
// given it stdin when asked.
func (s *server) background(ctx context.Context, c *client.Client, in ExecInput, er api.ExecRequest) (RunResult, error) {
	if in.Stdin != "" && !in.StdinOpen {
		return RunResult{}, invalid("stdin with background: add stdin_open=true to give it input (then run_stdin writes more), or write it to a file and redirect it")
	}
	er.Detach, er.Stdin = true, in.StdinOpen
	run, err := c.ExecDetached(ctx, in.Name, er)
	if err != nil {
		return RunResult{}, err
	}
	if in.Stdin != "" {
		if err := c.SendStdin(ctx, in.Name, run.ID, strings.NewReader(in.Stdin), false); err != nil {
			return RunResult{}, fmt.Errorf("giving run %s its stdin: %w", run.ID, err)
		}
	}
	return RunResult{RunID: run.ID, Status: run.Status, Stdout: "", Stderr: ""}, nil
}

// progress tells the client, when it asked for progress, how much output
// a command has made every few seconds while it runs.
func (s *server) progress(ctx context.Context, req *mcp.CallToolRequest, stdout, stderr *tail) (stop func()) {
	token := req.Params.GetProgressToken()
	if token == nil || req.Session == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		start := time.Now()
		tick := time.NewTicker(2 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			secs := time.Since(start).Seconds()
			msg := fmt.Sprintf("running for %.0fs; %d bytes of stdout, %d of stderr", secs, stdout.total(), stderr.total())
			if l := stdout.lastLine(); l != "" {
				msg += "; last line: " + l
			}
			_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: secs, Message: msg})
		}
	}()
	return func() { cancel(); <-done }
}

func (s *server) output(ctx context.Context, c *client.Client, _ *mcp.CallToolRequest, in OutputInput) (RunResult, error) {
	if in.Wait < 0 || in.StdoutFrom < 0 || in.StderrFrom < 0 {
		return RunResult{}, invalid("wait_seconds and the offsets cannot be negative")
	}
	if in.Wait > 0 {
		wctx, cancel := context.WithTimeout(ctx, time.Duration(in.Wait*float64(time.Second)))
		defer cancel()
		run, err := c.GetRun(ctx, in.Name, in.RunID)
		if err != nil {
			return RunResult{}, err
		}
		// Following stdout to its end waits for the run; the output
		// itself is read below.
		if run.Status == api.RunRunning {
			rc, err := c.FollowLogs(wctx, in.Name, in.RunID, "stdout", run.StdoutSize, true)
			if err == nil {
				_, _ = io.Copy(io.Discard, rc)
				rc.Close()
			} else if wctx.Err() == nil {
				return RunResult{}, err
			}
		}
	}
	return s.result(ctx, c, in.Name, in.RunID, in.StdoutFrom, in.StderrFrom)
}

// result reads a run's record and its output from the given offsets, or
// the tails when they are 0.
func (s *server) result(ctx context.Context, c *client.Client, name, runID string, outFrom, errFrom int64) (RunResult, error) {
	run, err := c.GetRun(ctx, name, runID)
	if err != nil {
		return RunResult{}, err
	}
	stdout, stderr := newTail(s.opts.OutputMax), newTail(s.opts.OutputMax)
	for _, st := range []struct {
		name string
		from int64
		size int64
		into *tail
	}{{"stdout", outFrom, run.StdoutSize, stdout}, {"stderr", errFrom, run.StderrSize, stderr}} {
		from := st.from
		if from == 0 {
			from = max(0, st.size-int64(s.opts.OutputMax))
		}
		st.into.skipped = from
		if from >= st.size {
			continue
		}
		rc, err := c.Logs(ctx, name, runID, st.name, from, false)
		if err != nil {
			return RunResult{}, err
		}
		_, err = io.Copy(st.into, io.LimitReader(rc, int64(s.opts.OutputMax)))
		rc.Close()
		if err != nil {
			return RunResult{}, fmt.Errorf("reading the run's %s: %w", st.name, err)
		}
		st.into.more = from+st.into.n < st.size
	}
	return resultOf(run, stdout, stderr), nil
}

func resultOf(run *api.Run, stdout, stderr *tail) RunResult {
	return RunResult{
		RunID: run.ID, Status: run.Status, ExitCode: run.ExitCode, Signal: run.Signal, LimitHit: run.LimitHit,
		Stdout: stdout.String(), Stderr: stderr.String(),
		StdoutBytes: run.StdoutSize, StderrBytes: run.StderrSize,
		Truncated: stdout.truncated() || stderr.truncated(),
	}
}

// tail keeps the last max bytes written to it, and counts them all.
type tail struct {
	mu      sync.Mutex
	max     int
	buf     []byte
	n       int64 // bytes written
	skipped int64 // bytes before the first written, not read at all
	more    bool  // bytes after the last read, not read at all
}

func newTail(max int) *tail { return &tail{max: max} }

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.n += int64(len(p))
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tail) total() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.n
}

func (t *tail) truncated() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.skipped > 0 || t.more || t.n > int64(len(t.buf))
}

func (t *tail) lastLine() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := strings.TrimRight(string(t.buf), "\n")
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	if len(s) > 200 {
		s = s[len(s)-200:]
	}
	return s
}

// String is the kept bytes as text, invalid UTF-8 replaced.
func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.ToValidUTF8(string(t.buf), "\uFFFD")
}
