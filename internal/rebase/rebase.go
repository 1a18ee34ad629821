package rebase

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/sandbox"
	"github.com/den-dev/den/internal/specs"
)

// Rebase gives a sandbox a new root from an image version while it
// keeps what is its own: a files-only checkpoint of it first, then a
// fresh snapshot of the image, the kept paths copied over from the
// checkpoint, a cold boot as the next generation, and its setup steps run
// again. Processes end, as they could not run on another root. If
// anything after the checkpoint fails, a failed setup step included, the
// sandbox is booted back from the checkpoint, and the error says which
// step and what it printed. `den restore NAME CHECKPOINT` undoes a
// rebase that worked.

// Copier copies one path of a root filesystem into another on the host,
// as a rebase carries a sandbox's kept paths from its old root (a
// checkpoint's read-only snapshot) to its new one. CopyPath replaces p
// under toRoot with p from fromRoot, or reports false, changing nothing,
// when fromRoot has no p. It follows no symlink on the way to p.
type Copier interface {
	CopyPath(ctx context.Context, fromRoot, toRoot, p string) (bool, error)
}

// Config is what a Service needs.
type Config struct {
	// Sandboxes is the core whose verbs a rebase is made of.
	Sandboxes *sandbox.Service
	// Copier carries kept paths over in a rebase; nil: rebase is
	// unavailable.
	Copier Copier
	Logger *slog.Logger
}

// Service rebases sandboxes and changes what their rebases keep and run.
type Service struct {
	svc    *sandbox.Service
	copier Copier
	log    *slog.Logger
}

// New returns the rebase verbs over cfg.Sandboxes.
func New(cfg Config) *Service {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Service{svc: cfg.Sandboxes, copier: cfg.Copier, log: cfg.Logger}
}

// Params is what a caller asks of a rebase.
type Params struct {
	// Image is NAME or NAME@VERSION; "" means the sandbox's own image,
	// and no version its newest.
	Image string
}

// Result is what a rebase did.
type Result struct {
	Sandbox *sandbox.Sandbox
	// Checkpoint is the files-only checkpoint taken first: restoring it
	// undoes the rebase.
	Checkpoint *sandbox.Checkpoint
	From, To   string // IMAGE@VERSION before and after
	Kept       []string
	Steps      []sandbox.StepResult
	Duration   time.Duration
}

// Rebase moves sandbox ref onto p.Image (see the comment above). A sandbox
// that is paused or hibernated is woken first; a failure before the
// checkpoint changes nothing.
func (s *Service) Rebase(ctx context.Context, ref string, p Params) (*Result, error) {
	t0 := time.Now()
	var name string
	var version int
	if p.Image != "" {
		var err error
		if name, version, err = sandbox.ParseImageRef(p.Image); err != nil {
			return nil, err
		}
	}
	if s.copier == nil {
		return nil, errdefs.Unavailable("this dend cannot rebase: it has no way to copy kept paths")
	}
	var res *Result
	err := s.svc.WithSandbox(ctx, ref, func(sb *sandbox.Sandbox) error {
		var err error
		if res, err = s.rebaseLocked(ctx, sb, name, version); err != nil {
			return err
		}
		res.Duration = time.Since(t0)
		res.Sandbox = sb
		if err := s.svc.FillLatest(ctx, sb); err != nil {
			s.log.Warn("reading the newest image versions", "err", err)
		}
		s.log.Info("sandbox rebased", "sandbox", sb.Name, "from", res.From, "to", res.To, "steps", len(res.Steps), "took", res.Duration.Round(time.Millisecond))
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// rebaseLocked rebases sb, whose lifecycle lock the caller holds, onto
// image name at version (name "": its own image; version 0: the newest).
func (s *Service) rebaseLocked(ctx context.Context, sb *sandbox.Sandbox, name string, version int) (*Result, error) {
	if err := sandbox.Require(sb, "rebase", sandbox.StateRunning, sandbox.StatePaused, sandbox.StateHibernated, sandbox.StateStopped); err != nil {
		return nil, err
	}
	// Kept paths set before dend refused some (/run/secrets, /etc/passwd)
	// are refused here, before anything changes.
	if err := specs.ValidateSetup(nil, sb.Spec.Keep); err != nil {
		return nil, errdefs.WithHint(fmt.Errorf("rebasing sandbox %q: %w", sb.Name, err),
			fmt.Sprintf("change its kept paths first: `den setup %s --keep-path PATH ...`", sb.Name))
	}
	if name == "" {
		name = sb.Spec.Image
	}
	if version == 0 {
		if err := s.svc.FetchImage(ctx, name); err != nil {
			return nil, err
		}
	}
	im, err := s.svc.ImageVersion(ctx, name, version)
	if err != nil {
		return nil, fmt.Errorf("rebasing sandbox %q: %w", sb.Name, err)
	}
	release, err := s.svc.AdmitCheckpoint(ctx, sb)
	if err != nil {
		return nil, err
	}
	defer release()
	if sb.State == sandbox.StatePaused || sb.State == sandbox.StateHibernated {
		if err := s.svc.ResumeLocked(ctx, sb, "woken to be rebased"); err != nil {
			return nil, err
		}
	}
	ck, err := s.svc.CheckpointFilesLocked(ctx, sb, s.label(ctx, sb))
	if err != nil {
		return nil, fmt.Errorf("rebasing sandbox %q: checkpointing it first: %w", sb.Name, err)
	}
	sb.Head = ck.ID
	from := sandbox.ImageAt(sb.Spec.Image, sb.Spec.ImageVersion)
	// Pending from here on: a dend that dies in the middle of what
	// follows tells, when it starts, what the rebase left and which
	// checkpoint undoes it (internal/recovery's recoverRebase).
	sb.Pending, sb.Checkpoint = sandbox.PendingRebase, ck.ID
	if err := s.svc.Record(ctx, sb, sandbox.EventCheckpoint, "checkpoint "+ck.Description()+" before a rebase"); err != nil {
		return nil, err
	}
	res := &Result{Checkpoint: ck, From: from, To: sandbox.ImageAt(im.Name, im.Version)}
	if err := s.onto(ctx, sb, ck, im, res); err != nil {
		return nil, s.rollBack(ctx, sb, ck, "rebase", fmt.Sprintf("rebasing sandbox %q", sb.Name), err,
			fmt.Sprintf("fix the steps with `den setup %s --step ...` (or the harness's with `den harness set %s ...`), then rebase again", sb.Name, sb.Name))
	}
	return res, nil
}

// label names a rebase's checkpoint pre-rebase-gN after the generation
// it saves, unless the sandbox has a checkpoint of that name.
func (s *Service) label(ctx context.Context, sb *sandbox.Sandbox) string {
	label := fmt.Sprintf("pre-rebase-g%d", sb.Generation)
	if _, err := s.svc.CheckpointOf(ctx, sb, label); err == nil {
		return ""
	}
	return label
}

// onto does the steps of a rebase after its checkpoint ck: the caller
// rolls back to ck if it fails.
func (s *Service) onto(ctx context.Context, sb *sandbox.Sandbox, ck *sandbox.Checkpoint, im *sandbox.Image, res *Result) error {
	if err := s.svc.NextGenerationLocked(ctx, sb); err != nil {
		return err
	}
	sb.Pending, sb.Checkpoint = sandbox.PendingRebase, ck.ID
	sb.Spec.Image, sb.Spec.ImageVersion = im.Name, im.Version
	sb.Spec.Base = &sandbox.ImageConfig{Env: im.Env, Cwd: im.Cwd, User: im.User}
	if err := s.svc.Record(ctx, sb, "rebasing", fmt.Sprintf("booting generation %d on image %s", sb.Generation, res.To)); err != nil {
		return err
	}
	t0 := time.Now()
	newRoot, err := s.svc.NewRootLocked(ctx, sb, im)
	if err != nil {
		return err
	}
	oldRoot := s.svc.CheckpointRoot(ck)
	for _, p := range sb.Spec.KeptPaths() {
		copied, err := s.copier.CopyPath(ctx, oldRoot, newRoot, p)
		if err != nil {
			return fmt.Errorf("keeping %s: %w", p, err)
		}
		if copied {
			res.Kept = append(res.Kept, p)
		}
	}
	if err := s.svc.CapDiskLocked(ctx, sb); err != nil {
		return err
	}
	t1 := time.Now()
	if err := s.svc.BootLocked(ctx, sb); err != nil {
		return err
	}
	t2 := time.Now()
	steps, err := s.svc.RunSetupLocked(ctx, sb)
	res.Steps = steps
	if err != nil {
		return err
	}
	sb.Pending, sb.Checkpoint = "", ""
	s.svc.Touch(sb.ID)
	msg := fmt.Sprintf("rebased from %s to %s as generation %d; kept %s; %d setup and harness steps ran; checkpoint %s undoes it",
		res.From, res.To, sb.Generation, keptList(res.Kept), len(steps), ck.Description())
	s.log.Debug("rebased", "sandbox", sb.Name, "files", t1.Sub(t0), "boot", t2.Sub(t1), "setup", time.Since(t2))
	return s.svc.TransitionLocked(ctx, sb, sandbox.StateRunning, sandbox.EventRebased, msg)
}

func keptList(paths []string) string {
	if len(paths) == 0 {
		return "nothing"
	}
	return strings.Join(paths, " ")
}

// rollBack boots sb back from ck, its files (and so its image and
// harness) as they were before change ("rebase", "harness swap"), and
// returns cause, wrapped as doing says ("rebasing sandbox \"web\""), with
// what became of the sandbox and fix, how to try again. It runs to the
// end even when ctx is done.
func (s *Service) rollBack(ctx context.Context, sb *sandbox.Sandbox, ck *sandbox.Checkpoint, change, doing string, cause error, fix string) error {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	sb.Spec.Image, sb.Spec.ImageVersion, sb.Spec.Base = ck.Manifest.Spec.Image, ck.Manifest.Spec.ImageVersion, ck.Manifest.Spec.Base
	sb.Spec.Harness = ck.Manifest.Spec.Harness.Clone()
	why := fmt.Sprintf("%s failed (%v); rolled back to checkpoint %s", change, cause, ck.ID)
	if err := s.svc.RestoreLocked(cctx, sb, ck, why); err != nil {
		s.log.Error("rolling back a failed "+change, "sandbox", sb.Name, "checkpoint", ck.ID, "err", err)
		return errdefs.WithHint(fmt.Errorf("%s: %w; rolling back to checkpoint %s failed too: %v", doing, cause, ck.ID, err),
			fmt.Sprintf("`den restore %s %s` tries the rollback again", sb.Name, ck.ID))
	}
	return errdefs.WithHint(fmt.Errorf("%s: %w", doing, cause),
		fmt.Sprintf("nothing changed: the sandbox was booted again from checkpoint %s, its files as they were "+
			"(its processes ended, its services started again); %s", ck.Description(), fix))
}
