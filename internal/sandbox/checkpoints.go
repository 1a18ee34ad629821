package sandbox

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/quota"
	"github.com/den-dev/den/internal/retention"
)

// Checkpoint takes an immutable checkpoint of a running or paused sandbox:
// its files, and its processes and memory unless p.FSOnly. A running
// sandbox is frozen only while its memory is written and keeps running.
func (s *Service) Checkpoint(ctx context.Context, ref string, p CheckpointParams) (_ *Checkpoint, err error) {
	defer s.observe(VerbCheckpoint, time.Now(), &err)
	if err := ValidateLabel(p.Name); err != nil {
		return nil, err
	}
	sb, unlock, err := s.lockSandbox(ctx, ref)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := Require(sb, "checkpoint", StateRunning, StatePaused); err != nil {
		return nil, err
	}
	if err := s.admission.CheckCheckpointRoom(ctx, "checkpoint sandbox "+sb.Name); err != nil {
		return nil, err
	}
	if p.Name != "" {
		if _, err := s.cfg.Store.GetCheckpoint(ctx, sb.ID, p.Name); err == nil {
			return nil, errdefs.WithHint(errdefs.Conflict("sandbox %q already has a checkpoint named %q", sb.Name, p.Name),
				"choose another name, or remove the old one with `den checkpoint rm`")
		}
	}
	if !p.FSOnly {
		instead := fmt.Sprintf("take a files-only checkpoint with `den checkpoint %s --fs-only`", sb.Name)
		if err := s.refuseSecretCapture(ctx, sb, "checkpointing the memory of", instead); err != nil {
			return nil, err
		}
	}
	release, err := s.admission.ReserveCheckpoint(ctx, sb.Owner)
	if err != nil {
		return nil, err
	}
	defer release()
	s.Touch(sb.ID)
	ck, err := s.takeCheckpoint(ctx, sb, capture{kind: CheckpointManual, name: p.Name, memory: !p.FSOnly, leaveRunning: true})
	if err != nil {
		return nil, fmt.Errorf("checkpointing sandbox %q: %w", sb.Name, err)
	}
	sb.Head = ck.ID
	if err := s.Record(ctx, sb, EventCheckpoint, "checkpoint "+ck.Description()); err != nil {
		return nil, err
	}
	s.RetainLocked(ctx, sb)
	return s.FillNeededBy(ctx, ck)
}

// Description names ck in a message: its id, its name, and whether it
// holds files only.
func (ck *Checkpoint) Description() string {
	d := ck.ID
	if ck.Name != "" {
		d += " (" + ck.Name + ")"
	}
	if !ck.Memory {
		d += ", files only"
	}
	return d
}

// CheckpointOf finds sb's checkpoint ref, an id or a name.
func (s *Service) CheckpointOf(ctx context.Context, sb *Sandbox, ref string) (*Checkpoint, error) {
	if ref == "" {
		return nil, errdefs.WithHint(errdefs.Invalid("no checkpoint given"), fmt.Sprintf("list them with `den checkpoints %s`", sb.Name))
	}
	return s.cfg.Store.GetCheckpoint(ctx, sb.ID, ref)
}

// FindCheckpoint resolves a checkpoint named anywhere: its id, or
// SANDBOX:NAME.
func (s *Service) FindCheckpoint(ctx context.Context, ref string) (*Checkpoint, error) {
	if sbRef, name, ok := strings.Cut(ref, ":"); ok {
		sb, err := s.Get(ctx, sbRef)
		if err != nil {
			return nil, err
		}
		return s.CheckpointOf(ctx, sb, name)
	}
	ck, err := s.cfg.Store.GetCheckpoint(ctx, "", ref)
	if err != nil {
		return nil, errdefs.WithHint(err, "name a checkpoint by its id, or as SANDBOX:NAME")
	}
	return ck, nil
}

// FillNeededBy sets ck.NeededBy to the names of the sandboxes that need
// it (Needs) and returns ck.
func (s *Service) FillNeededBy(ctx context.Context, ck *Checkpoint) (*Checkpoint, error) {
	needs, err := s.Needs(ctx)
	if err != nil {
		return nil, err
	}
	ck.NeededBy = needs[ck.ID]
	return ck, nil
}

// Needs maps each checkpoint a live sandbox depends on to those
// sandboxes' names: one hibernated in it or in error after failing to
// come back from it, and one created or forked from it.
func (s *Service) Needs(ctx context.Context) (map[string][]string, error) {
	sbs, err := s.cfg.Store.ListSandboxes(ctx)
	if err != nil {
		return nil, err
	}
	m := map[string][]string{}
	for _, sb := range sbs {
		for _, id := range []string{sb.Checkpoint, sb.Origin} {
			if id != "" && (len(m[id]) == 0 || m[id][len(m[id])-1] != sb.Name) {
				m[id] = append(m[id], sb.Name)
			}
		}
	}
	return m, nil
}

// DeleteCheckpointLocked removes ck, a checkpoint of owner, whose
// lifecycle lock the caller holds (WithRecord) and which the caller
// checked nothing needs: its record, then its files here, moving owner's
// head back to ck's parent when it was ck.
func (s *Service) DeleteCheckpointLocked(ctx context.Context, owner *Sandbox, ck *Checkpoint) error {
	if err := s.cfg.Store.DeleteCheckpoint(ctx, ck.ID); err != nil {
		return fmt.Errorf("removing checkpoint %s: %w", ck.ID, err)
	}
	s.DropCheckpointFiles(ctx, ck)
	if owner.Head == ck.ID && owner.State != StateDestroyed {
		owner.Head = ck.Parent
		if err := s.Record(ctx, owner, "checkpoint-removed", "checkpoint "+ck.Description()+" removed"); err != nil {
			return err
		}
	}
	return nil
}

// Restore rewinds a sandbox in place to one of its checkpoints, as a new
// generation: processes and memory too when the checkpoint has them.
// Whatever ran in the sandbox before is ended.
func (s *Service) Restore(ctx context.Context, ref, ckpt string) (_ *Sandbox, err error) {
	defer s.observe(VerbRestore, time.Now(), &err)
	sb, unlock, err := s.lockSandbox(ctx, ref)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := Require(sb, "restore", StateRunning, StatePaused, StateHibernated, StateStopped, StateError); err != nil {
		return nil, err
	}
	ck, err := s.CheckpointOf(ctx, sb, ckpt)
	if err != nil {
		return nil, err
	}
	if err := s.Restorable(ck, sb); err != nil {
		return nil, err
	}
	if err := s.admission.AdmitRenewal(ctx, sb.Owner, quota.Limits(sb.Spec.Limits())); err != nil {
		return nil, err
	}
	if err := s.rewind(ctx, sb, ck, false, EventRestored, "restored on request"); err != nil {
		return nil, err
	}
	return sb, nil
}

// rewind ends sb's current instance and boots a new generation from ck.
func (s *Service) rewind(ctx context.Context, sb *Sandbox, ck *Checkpoint, cold bool, evType, why string) error {
	s.halt(context.WithoutCancel(ctx), sb, 0)
	if err := s.LoseRunsLocked(ctx, sb); err != nil {
		return err
	}
	sb.Generation++
	sb.Token = NewToken()
	sb.Pending, sb.Checkpoint = PendingRestore, ck.ID
	// Its files come from ck, and so what they were made from: restoring
	// the checkpoint a rebase took undoes the rebase, and the one a
	// harness swap took brings the old harness back.
	if ck.Manifest.Spec.Image != "" {
		sb.Spec.Image, sb.Spec.ImageVersion, sb.Spec.Base = ck.Manifest.Spec.Image, ck.Manifest.Spec.ImageVersion, ck.Manifest.Spec.Base
		sb.Spec.Harness = ck.Manifest.Spec.Harness.Clone()
	}
	if err := s.Record(ctx, sb, "restoring", fmt.Sprintf("booting generation %d from checkpoint %s", sb.Generation, ck.Description())); err != nil {
		return err
	}
	return s.finishBoot(ctx, sb, ck, cold, evType, why)
}

// RetainLocked applies sb's retention policy to its manual checkpoints:
// beyond the newest KeepLast, or older than MaxAge, they go, unless a
// sandbox needs them (internal/retention decides which). The caller
// holds sb's lifecycle lock. Errors are logged.
func (s *Service) RetainLocked(ctx context.Context, sb *Sandbox) {
	p := s.EffectivePolicy(sb)
	if !p.Retains() {
		return
	}
	cks, err := s.cfg.Store.ListCheckpoints(ctx, sb.ID)
	if err != nil {
		s.log.Error("applying retention", "sandbox", sb.Name, "err", err)
		return
	}
	needs, err := s.Needs(ctx)
	if err != nil {
		s.log.Error("applying retention", "sandbox", sb.Name, "err", err)
		return
	}
	kept := make([]retention.Checkpoint, len(cks))
	for i, ck := range cks {
		kept[i] = retention.Checkpoint{Manual: ck.Kind == CheckpointManual, Created: ck.CreatedAt, Needed: len(needs[ck.ID]) > 0}
	}
	for _, i := range retention.Drops(p, kept, s.cfg.Now()) {
		ck := cks[i]
		s.log.Info("retention removes checkpoint", "sandbox", sb.Name, "checkpoint", ck.ID)
		if err := s.DeleteCheckpointLocked(ctx, sb, ck); err != nil {
			s.log.Error("applying retention", "sandbox", sb.Name, "err", err)
		}
	}
}

// Checkpoint collection is internal/checkpointgc's: the idle loop's
// tick (internal/idling) asks it to remove the checkpoints nothing needs
// any more, and a removal that lets go of some asks it to remove those
// at once. A verb working with a checkpoint pins it meanwhile, so that
// none is taken from under it.

// Collector removes the checkpoints a removal lets go of
// (internal/checkpointgc's Collector is it); without one, they go only
// by retention or by hand.
type Collector interface {
	// Freed removes, at once, those of checkpoints ids that nothing
	// needs any more and a collection would take.
	Freed(ctx context.Context, ids ...string)
}

// UseCollector makes c remove the checkpoints a removal frees. Call it
// once, before recovery (internal/recovery's Recover).
func (s *Service) UseCollector(c Collector) { s.gc = c }

// CollectFreed removes, at once, those of checkpoints ids that nothing
// needs any more and garbage collection would take: called when what
// needed them (an upload) has just let go.
func (s *Service) CollectFreed(ctx context.Context, ids ...string) {
	if s.gc != nil {
		s.gc.Freed(ctx, ids...)
	}
}

// Pin keeps checkpoint id from garbage collection while a verb works
// with it, until unpin is called.
func (s *Service) Pin(id string) (unpin func()) { return s.pins.Pin(id) }
