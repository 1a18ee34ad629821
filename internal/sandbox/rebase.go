package sandbox

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/quota"
)

// Rebase gives a sandbox a new root from an image version while it keeps
// what is its own: a files-only checkpoint of it first, then a fresh
// snapshot of the image, the kept paths copied over from the checkpoint,
// a cold boot as the next generation, and its setup steps run again.
// Processes end, as they could not run on another root. If anything
// after the checkpoint fails, a failed setup step included, the sandbox
// is booted back from the checkpoint, and the error says which step and
// what it printed. `den restore NAME CHECKPOINT` undoes a rebase that
// worked.

// RebaseParams is what a caller asks of a rebase.
type RebaseParams struct {
	// Image is NAME or NAME@VERSION; "" means the sandbox's own image,
	// and no version its newest.
	Image string
}

// RebaseResult is what a rebase did.
type RebaseResult struct {
	Sandbox *Sandbox
	// Checkpoint is the files-only checkpoint taken first: restoring it
	// undoes the rebase.
	Checkpoint *Checkpoint
	From, To   string // IMAGE@VERSION before and after
	Kept       []string
	Steps      []StepResult
	Duration   time.Duration
}

// imageAt names an image version as IMAGE@VERSION.
func imageAt(name string, version int) string { return fmt.Sprintf("%s@%d", name, max(version, 1)) }

// Rebase moves sandbox ref onto p.Image (see the comment above). A sandbox
// that is paused or hibernated is woken first; a failure before the
// checkpoint changes nothing.
func (s *Service) Rebase(ctx context.Context, ref string, p RebaseParams) (*RebaseResult, error) {
	t0 := time.Now()
	var name string
	var version int
	if p.Image != "" {
		var err error
		if name, version, err = ParseImageRef(p.Image); err != nil {
			return nil, err
		}
	}
	if s.cfg.Copier == nil {
		return nil, errdefs.Unavailable("this dend cannot rebase: it has no way to copy kept paths")
	}
	sb, unlock, err := s.lockSandbox(ctx, ref)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := require(sb, "rebase", StateRunning, StatePaused, StateHibernated, StateStopped); err != nil {
		return nil, err
	}
	// Kept paths set before dend refused some (/run/secrets, /etc/passwd)
	// are refused here, before anything changes.
	if err := ValidateSetup(nil, sb.Spec.Keep); err != nil {
		return nil, errdefs.WithHint(fmt.Errorf("rebasing sandbox %q: %w", sb.Name, err),
			fmt.Sprintf("change its kept paths first: `den setup %s --keep-path PATH ...`", sb.Name))
	}
	if name == "" {
		name = sb.Spec.Image
	}
	if version == 0 {
		if err := s.fetchImage(ctx, name); err != nil {
			return nil, err
		}
	}
	im, err := s.cfg.Images.Version(ctx, name, version)
	if err != nil {
		return nil, fmt.Errorf("rebasing sandbox %q: %w", sb.Name, err)
	}
	if err := s.admitCheckpoint(ctx, sb); err != nil {
		return nil, err
	}
	release, err := s.reserve(ctx, sb.Owner, quota.Use{Checkpoints: 1}, nil)
	if err != nil {
		return nil, err
	}
	defer release()
	if sb.State == StatePaused || sb.State == StateHibernated {
		if err := s.resumeLocked(ctx, sb, "woken to be rebased"); err != nil {
			return nil, err
		}
	}
	s.touch(sb.ID)
	ck, err := s.takeCheckpoint(ctx, sb, capture{kind: CheckpointManual, name: s.rebaseLabel(ctx, sb), leaveRunning: true})
	if err != nil {
		return nil, fmt.Errorf("rebasing sandbox %q: checkpointing it first: %w", sb.Name, err)
	}
	sb.Head = ck.ID
	from := imageAt(sb.Spec.Image, sb.Spec.ImageVersion)
	// Pending from here on: a dend that dies in the middle of what
	// follows tells, when it starts, what the rebase left and which
	// checkpoint undoes it (recoverRebase).
	sb.Pending, sb.Checkpoint = PendingRebase, ck.ID
	if err := s.record(ctx, sb, EventCheckpoint, "checkpoint "+describe(ck)+" before a rebase"); err != nil {
		return nil, err
	}
	res := &RebaseResult{Checkpoint: ck, From: from, To: imageAt(im.Name, im.Version)}
	if err := s.rebaseOnto(ctx, sb, ck, im, res); err != nil {
		return nil, s.rollBack(ctx, sb, ck, err)
	}
	res.Duration = time.Since(t0)
	res.Sandbox = sb
	if err := s.fillLatest(ctx, sb); err != nil {
		s.log.Warn("reading the newest image versions", "err", err)
	}
	s.log.Info("sandbox rebased", "sandbox", sb.Name, "from", from, "to", res.To, "steps", len(res.Steps), "took", res.Duration.Round(time.Millisecond))
	return res, nil
}

// rebaseLabel names a rebase's checkpoint pre-rebase-gN after the
// generation it saves, unless the sandbox has a checkpoint of that name.
func (s *Service) rebaseLabel(ctx context.Context, sb *Sandbox) string {
	label := fmt.Sprintf("pre-rebase-g%d", sb.Generation)
	if _, err := s.cfg.Store.GetCheckpoint(ctx, sb.ID, label); err == nil {
		return ""
	}
	return label
}

// rebaseOnto does the steps of a rebase after its checkpoint ck: the
// caller rolls back to ck if it fails.
func (s *Service) rebaseOnto(ctx context.Context, sb *Sandbox, ck *Checkpoint, im *Image, res *RebaseResult) error {
	if sb.State != StateStopped {
		s.halt(context.WithoutCancel(ctx), sb, 0)
	}
	if err := s.loseRuns(ctx, sb); err != nil {
		return err
	}
	sb.Generation++
	sb.Token = newToken()
	sb.Pending, sb.Checkpoint = PendingRebase, ck.ID
	sb.Spec.Image, sb.Spec.ImageVersion = im.Name, im.Version
	sb.Spec.Base = &ImageConfig{Env: im.Env, Cwd: im.Cwd, User: im.User}
	if err := s.record(ctx, sb, "rebasing", fmt.Sprintf("booting generation %d on image %s", sb.Generation, res.To)); err != nil {
		return err
	}
	t0 := time.Now()
	if err := s.cfg.Volumes.Remove(ctx, sb.VolumeKey()); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		return fmt.Errorf("removing the old root: %w", err)
	}
	if _, err := s.cfg.Volumes.Snapshot(ctx, im.VolumeKey(), sb.VolumeKey(), false); err != nil {
		return fmt.Errorf("making the new root: %w", err)
	}
	oldRoot, newRoot := s.cfg.Volumes.Path(ck.VolumeKey()), s.cfg.Volumes.Path(sb.VolumeKey())
	for _, p := range sb.Spec.KeptPaths() {
		copied, err := s.cfg.Copier.CopyPath(ctx, oldRoot, newRoot, p)
		if err != nil {
			return fmt.Errorf("keeping %s: %w", p, err)
		}
		if copied {
			res.Kept = append(res.Kept, p)
		}
	}
	if err := s.capDisk(ctx, sb); err != nil {
		return err
	}
	t1 := time.Now()
	if err := s.startInstance(ctx, sb); err != nil {
		return err
	}
	t2 := time.Now()
	steps, err := s.runSetup(ctx, sb)
	res.Steps = steps
	if err != nil {
		return err
	}
	sb.Pending, sb.Checkpoint = "", ""
	s.touch(sb.ID)
	msg := fmt.Sprintf("rebased from %s to %s as generation %d; kept %s; %d setup steps ran; checkpoint %s undoes it",
		res.From, res.To, sb.Generation, keptList(res.Kept), len(steps), describe(ck))
	s.log.Debug("rebased", "sandbox", sb.Name, "files", t1.Sub(t0), "boot", t2.Sub(t1), "setup", time.Since(t2))
	return s.transition(ctx, sb, StateRunning, EventRebased, msg)
}

// recoverRebase settles, when dend starts, a sandbox whose rebase dend
// was in the middle of. st is its instance's state, ck (or ckErr) the
// checkpoint the rebase took first. Before the rebase booted a new
// generation the sandbox is as it was: it carries on, or, its instance
// gone, waits stopped with its files. After, its new root is half made:
// it waits in error, and restoring the checkpoint undoes the rebase.
func (s *Service) recoverRebase(ctx context.Context, sb *Sandbox, st InstanceState, ck *Checkpoint, ckErr error) (bool, error) {
	undo := fmt.Sprintf("checkpoint %s", sb.Checkpoint)
	if ckErr == nil {
		ref := ck.ID
		if ck.Name != "" {
			ref = ck.Name
		}
		undo = fmt.Sprintf("`den restore %s %s` goes back to checkpoint %s, taken before it", sb.Name, ref, describe(ck))
	}
	sb.Pending = ""
	if ckErr == nil && sb.Generation == ck.Generation {
		sb.Checkpoint = ""
		alive := st == InstanceRunning || st == InstancePaused
		if sb.State == StateRunning && alive && s.pingable(ctx, sb, "") {
			if err := s.record(ctx, sb, EventFailed, "a rebase was interrupted by a dend restart before it changed anything; still running"); err != nil {
				return false, err
			}
			return s.reattach(ctx, sb, st)
		}
		why := fmt.Sprintf("a rebase was interrupted by a dend restart before it changed its root; its files are as they were: `den start %s` boots them, or %s", sb.Name, undo)
		if sb.State == StateStopped {
			return false, s.record(ctx, sb, EventFailed, why)
		}
		return false, s.lose(ctx, sb, why)
	}
	s.halt(ctx, sb, 0)
	to := imageAt(sb.Spec.Image, sb.Spec.ImageVersion)
	if ckErr == nil {
		sb.Spec.Image, sb.Spec.ImageVersion, sb.Spec.Base = ck.Manifest.Spec.Image, ck.Manifest.Spec.ImageVersion, ck.Manifest.Spec.Base
	}
	return false, s.transition(ctx, sb, StateError, EventFailed,
		fmt.Sprintf("a rebase to %s was interrupted by a dend restart, its new root half made; %s", to, undo))
}

func keptList(paths []string) string {
	if len(paths) == 0 {
		return "nothing"
	}
	return strings.Join(paths, " ")
}

// rollBack boots sb back from ck, its files as they were before the
// rebase, and returns cause with what became of the sandbox. It runs to
// the end even when ctx is done.
func (s *Service) rollBack(ctx context.Context, sb *Sandbox, ck *Checkpoint, cause error) error {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	sb.Spec.Image, sb.Spec.ImageVersion, sb.Spec.Base = ck.Manifest.Spec.Image, ck.Manifest.Spec.ImageVersion, ck.Manifest.Spec.Base
	why := fmt.Sprintf("rebase failed (%v); rolled back to checkpoint %s", cause, ck.ID)
	if err := s.rewind(cctx, sb, ck, true, EventRestored, why); err != nil {
		s.log.Error("rolling back a failed rebase", "sandbox", sb.Name, "checkpoint", ck.ID, "err", err)
		return errdefs.WithHint(fmt.Errorf("rebasing sandbox %q: %w; rolling back to checkpoint %s failed too: %v", sb.Name, cause, ck.ID, err),
			fmt.Sprintf("`den restore %s %s` tries the rollback again", sb.Name, ck.ID))
	}
	return errdefs.WithHint(fmt.Errorf("rebasing sandbox %q: %w", sb.Name, cause),
		fmt.Sprintf("nothing changed: the sandbox was booted again from checkpoint %s, its files as they were (its processes ended); "+
			"fix the steps with `den setup %s --step ...`, then rebase again", describe(ck), sb.Name))
}

// fillLatest sets ImageLatest on each sandbox from the image records.
func (s *Service) fillLatest(ctx context.Context, sbs ...*Sandbox) error {
	ims, err := s.cfg.Store.ListImages(ctx)
	if err != nil {
		return err
	}
	latest := map[string]int{}
	for _, im := range ims {
		latest[im.Name] = im.Version
	}
	for _, sb := range sbs {
		sb.ImageLatest = latest[sb.Spec.Image]
	}
	return nil
}
