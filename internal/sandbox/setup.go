package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/guest"
	"github.com/den-dev/den/internal/specs"
)

// Setup steps and kept paths: what a sandbox is on top of its image. The
// steps are shell commands run once when it is created and again, in
// order, each time `den rebase` gives it a new root from a newer image;
// the kept paths are what a rebase carries over from the old root.

// DefaultKeep are the paths every rebase keeps, before the ones a
// sandbox names.
var DefaultKeep = []string{"/root", "/home", "/work", "/srv"}

// MaxKeepPaths bounds a sandbox's kept paths, and a harness's config
// paths (specs.MaxKeepPaths).
const MaxKeepPaths = specs.MaxKeepPaths

const (
	// SetupStepTimeout bounds one setup step.
	SetupStepTimeout = 30 * time.Minute
	// setupOutputTail is how much of a failed step's output its error
	// carries, per stream.
	setupOutputTail = 2 << 10
)

// validateSteps and validateKeptPath are internal/specs' checks of setup
// steps and kept paths, as a harness's steps and config paths get them
// (harness.go); they, and MaxKeepPaths, go once harness.go calls specs
// itself.
func validateSteps(kind string, steps []string, example string) error {
	return specs.ValidateSteps(kind, steps, example)
}

func validateKeptPath(kind, example, p string) error { return specs.ValidateKeptPath(kind, example, p) }

// KeptPaths are the paths a rebase of a sandbox with spec s carries over:
// DefaultKeep, its own and its harness's config paths, sorted, without any that lies inside another.
func (s *Spec) KeptPaths() []string {
	all := append(slices.Clone(DefaultKeep), s.Keep...)
	if s.Harness != nil {
		all = append(all, s.Harness.ConfigPaths...)
	}
	slices.Sort(all)
	var out []string
	for _, p := range all {
		if len(out) > 0 && (p == out[len(out)-1] || strings.HasPrefix(p, out[len(out)-1]+"/")) {
			continue
		}
		out = append(out, p)
	}
	return out
}

// StepResult is how one setup step ended.
type StepResult struct {
	Step     int  // from 1
	Harness  bool // a harness's step, numbered apart from the setup steps
	Command  string
	RunID    string
	ExitCode int
	Duration time.Duration
}

// SetupError is a setup step that failed: which one, how, and the end of
// what it printed.
type SetupError struct {
	Step    int  // from 1
	Harness bool // a harness's step
	Command string
	RunID   string
	// Status is how the run ended (exited, killed, timed_out, lost), and
	// ExitCode its exit code when it exited.
	Status   RunStatus
	ExitCode int
	Stdout   string // the last bytes of each stream
	Stderr   string
	err      error // what kept it from running at all, or nil
}

func (e *SetupError) Error() string {
	var how string
	switch {
	case e.err != nil:
		how = e.err.Error()
	case e.Status == RunExited:
		how = fmt.Sprintf("exit code %d", e.ExitCode)
	default:
		how = string(e.Status)
	}
	kind := "setup step"
	if e.Harness {
		kind = "harness step"
	}
	msg := fmt.Sprintf("%s %d `%s` failed: %s", kind, e.Step, e.Command, how)
	if out := lastLines(e.Stderr, 5, 1000); out != "" {
		msg += "; stderr: " + out
	} else if out := lastLines(e.Stdout, 5, 1000); out != "" {
		msg += "; stdout: " + out
	}
	return msg
}

// Is classifies a failed step as a conflict with what the new image holds,
// unless something else kept it from running.
func (e *SetupError) Is(target error) bool {
	if e.err != nil {
		return errors.Is(e.err, target)
	}
	return target == errdefs.ErrConflict
}

func (e *SetupError) Unwrap() error { return e.err }

// runSetup runs sb's setup steps, then its harness's, in order in its
// running instance, each as a recorded run of `/bin/sh -c STEP`, and
// stops at the first that does not exit 0, returning a *SetupError. The
// caller holds sb's lifecycle lock. Steps get the sandbox's environment,
// not its secrets.
func (s *Service) runSetup(ctx context.Context, sb *Sandbox) ([]StepResult, error) {
	done, err := s.runSteps(ctx, sb, false, sb.Spec.Setup)
	if err != nil || sb.Spec.Harness == nil {
		return done, err
	}
	more, err := s.runSteps(ctx, sb, true, sb.Spec.Harness.Steps)
	return append(done, more...), err
}

// runSteps runs steps, a harness's or the setup's, as runSetup does.
func (s *Service) runSteps(ctx context.Context, sb *Sandbox, harness bool, steps []string) ([]StepResult, error) {
	var done []StepResult
	for i, step := range steps {
		t0 := time.Now()
		run, err := s.runStep(ctx, sb, step)
		serr := &SetupError{Step: i + 1, Harness: harness, Command: step}
		if err != nil {
			serr.err = err
			return done, serr
		}
		serr.RunID, serr.Status = run.ID, run.Status
		if run.Status == RunExited && run.ExitCode != nil && *run.ExitCode == 0 {
			done = append(done, StepResult{Step: i + 1, Harness: harness, Command: step, RunID: run.ID, Duration: time.Since(t0)})
			continue
		}
		if run.ExitCode != nil {
			serr.ExitCode = *run.ExitCode
		}
		serr.Stdout = s.outputTail(ctx, sb, run, StreamStdout, run.StdoutSize)
		serr.Stderr = s.outputTail(ctx, sb, run, StreamStderr, run.StderrSize)
		return done, serr
	}
	return done, nil
}

// runStep runs one setup step and waits for its final record.
func (s *Service) runStep(ctx context.Context, sb *Sandbox, step string) (*Run, error) {
	base := sb.Spec.Base
	if base == nil {
		base = &ImageConfig{}
	}
	argv := []string{"/bin/sh", "-c", step}
	spec := guest.ProcSpec{Argv: argv, Env: mergeEnv(base.Env, sb.Spec.Env), Cwd: firstNonEmpty(base.Cwd, "/"),
		User: base.User, Timeout: SetupStepTimeout}
	g := s.GuestFor(sb)
	run, err := s.startRun(sb.ID, g, spec, func(st guest.ProcStatus) (*Run, error) {
		run := &Run{
			ID: NewID(12), SandboxID: sb.ID, Generation: sb.Generation, GuestID: st.ID, PID: st.PID,
			Argv: argv, Cwd: spec.Cwd, User: spec.User, Status: RunRunning, StartedAt: st.StartedAt.UTC(),
			OutputMax: s.cfg.Output.PerStream,
		}
		return s.RecordStarted(ctx, run)
	})
	if err != nil {
		return nil, fmt.Errorf("starting it: %w", err)
	}
	_, o, err := s.runRecord(ctx, sb.ID, run.ID)
	if err != nil {
		return nil, err
	}
	if o != nil {
		select {
		case <-o.c.Finished():
		case <-ctx.Done():
			g.Signal(context.WithoutCancel(ctx), run.GuestID, syscall.SIGKILL)
			return nil, ctx.Err()
		}
	}
	return s.cfg.Store.GetRun(ctx, sb.ID, run.ID)
}

// outputTail is the last bytes of one stream of a finished run, whose
// collector is gone (waitRun), or "".
func (s *Service) outputTail(ctx context.Context, sb *Sandbox, run *Run, stream string, size int64) string {
	var b bytes.Buffer
	if err := s.OutputReader(sb.ID, run, nil, stream, max(0, size-setupOutputTail)).Copy(ctx, false, &b); err != nil {
		s.log.Warn("reading a failed setup step's output", "sandbox", sb.Name, "run", run.ID, "err", err)
	}
	return b.String()
}
