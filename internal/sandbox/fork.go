package sandbox

import (
	"context"
	"fmt"
	"time"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/peers"
	"github.com/den-dev/den/internal/specs"
)

// Fork makes p.Count children of a sandbox. From the live sandbox, the
// parent is frozen only while its memory is captured and keeps running;
// from a hibernated one, its sleeping state is used as it is; with p.From,
// a checkpoint of the parent. Each child is a sandbox of its own: new id,
// hostname, den-init token, network address and entropy; they diverge
// independently. Either every child is made or none is.
func (s *Service) Fork(ctx context.Context, ref string, p ForkParams) (_ []*Sandbox, err error) {
	defer s.observe(VerbFork, time.Now(), &err)
	names, err := p.childNames()
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		if err := s.NameFree(ctx, p.Owner, n); err != nil {
			return nil, err
		}
	}
	parent, unlock, err := s.lockSandbox(ctx, ref)
	if err != nil {
		return nil, err
	}
	lim, err := s.forkLimits(ctx, parent, p.From)
	if err != nil {
		unlock()
		return nil, err
	}
	release, err := s.Admit(ctx, "fork sandbox "+parent.Name, p.Owner, lim, len(names))
	if err != nil {
		unlock()
		return nil, err
	}
	defer release()
	ck, how, err := s.forkPoint(ctx, parent, p.From)
	if err != nil {
		unlock()
		return nil, err
	}
	defer s.Pin(ck.ID)()
	unlock()
	if err := s.Restorable(ck, parent); err != nil {
		return nil, err
	}
	var children []*Sandbox
	for _, n := range names {
		child, err := s.createFrom(ctx, CreateParams{Name: n, Labels: parent.Spec.Labels, Policy: parent.Policy, Owner: p.Owner, Network: &parent.Spec.Network}, ck, how,
			fmt.Sprintf("forked from sandbox %s, checkpoint %s", parent.Name, ck.ID))
		if err != nil {
			cctx := context.WithoutCancel(ctx)
			for _, c := range children {
				if rerr := s.Remove(cctx, c.ID, true); rerr != nil {
					s.log.Error("undoing fork", "child", c.Name, "err", rerr)
				}
			}
			return nil, fmt.Errorf("forking sandbox %q: %w", parent.Name, err)
		}
		children = append(children, child)
	}
	return children, nil
}

// forkLimits are the limits children of parent will have: those of the
// checkpoint they start from, which forkPoint captures from the parent's
// spec when it takes a new one.
func (s *Service) forkLimits(ctx context.Context, parent *Sandbox, from string) (Limits, error) {
	var ck *Checkpoint
	var err error
	switch {
	case from != "":
		ck, err = s.CheckpointOf(ctx, parent, from)
	case parent.State == StateHibernated:
		ck, err = s.cfg.Store.GetCheckpoint(ctx, parent.ID, parent.Checkpoint)
	default:
		return parent.Spec.Limits(), nil
	}
	if err != nil {
		return Limits{}, err
	}
	return ck.Manifest.Spec.Limits(), nil
}

// forkPoint returns the checkpoint children of parent start from, and
// how they are restored from it.
func (s *Service) forkPoint(ctx context.Context, parent *Sandbox, from string) (*Checkpoint, restoreFrom, error) {
	if from != "" {
		ck, err := s.CheckpointOf(ctx, parent, from)
		return ck, restoreFrom{}, err
	}
	switch parent.State {
	case StateHibernated:
		ck, err := s.cfg.Store.GetCheckpoint(ctx, parent.ID, parent.Checkpoint)
		return ck, restoreFrom{}, err
	case StateRunning, StatePaused:
	default:
		return nil, restoreFrom{}, Require(parent, "fork", StateRunning, StatePaused, StateHibernated)
	}
	instead := fmt.Sprintf("fork its files alone: `den checkpoint %s --fs-only --name base`, then `den fork %s NEW --from base`", parent.Name, parent.Name)
	if err := s.refuseSecretCapture(ctx, parent, "forking the processes of", instead); err != nil {
		return nil, restoreFrom{}, err
	}
	s.Touch(parent.ID)
	ck, err := s.takeCheckpoint(ctx, parent, capture{kind: CheckpointFork, memory: true, leaveRunning: true})
	if err != nil {
		return nil, restoreFrom{}, fmt.Errorf("capturing sandbox %q to fork it: %w", parent.Name, err)
	}
	if err := s.Record(ctx, parent, EventForked, "captured for a fork in checkpoint "+ck.ID); err != nil {
		return nil, restoreFrom{}, err
	}
	return ck, restoreFrom{sealedNow: true}, nil
}

func (p ForkParams) childNames() ([]string, error) {
	if err := specs.ValidateName("sandbox", p.Name); err != nil {
		return nil, err
	}
	n := p.Count
	if n == 0 {
		n = 1
	}
	if n < 0 || n > MaxForkCount {
		return nil, errdefs.WithHint(errdefs.Invalid("invalid fork count %d", p.Count), fmt.Sprintf("fork 1 to %d children at once", MaxForkCount))
	}
	if n == 1 {
		return []string{p.Name}, nil
	}
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%d", p.Name, i+1)
		if err := specs.ValidateName("sandbox", names[i]); err != nil {
			return nil, errdefs.WithHint(err, "the children are named NAME-1 … NAME-N: use a shorter NAME")
		}
	}
	return names, nil
}

// createFrom makes a sandbox whose files, and processes when ck has them,
// come from ck. Its spec is the one ck was taken with. Like Create, it
// leaves nothing behind when it fails.
func (s *Service) createFrom(ctx context.Context, p CreateParams, ck *Checkpoint, how restoreFrom, msg string) (*Sandbox, error) {
	spec := ck.Manifest.Spec
	spec.Labels = p.Labels
	spec.Ephemeral = p.Ephemeral
	// Memory that held the origin's secrets is sealed here too.
	spec.SecretsGranted = spec.SecretsEver() || ck.Manifest.Sealed != "" || len(p.Secrets) > 0
	spec.Secrets = p.Secrets // never the origin's
	spec.Ports = nil         // nor its exposed ports: see ExposePort
	if p.Network != nil {
		spec.Network = *p.Network
	}
	id := NewID(12)
	viewsFrom, err := s.planViews(ctx, id, &spec, ck)
	if err != nil {
		return nil, err
	}
	now := s.cfg.Now().UTC()
	sb := &Sandbox{
		ID: id, Name: p.Name, Spec: spec, State: StateCreating, Generation: 1, Token: NewToken(),
		Node: s.cfg.Node, Owner: p.Owner, Policy: p.Policy, Origin: ck.ID, Head: ck.ID, CreatedAt: now, UpdatedAt: now,
	}
	if sb.Slot, err = s.AllocSlot(ctx, sb.ID); err != nil {
		return nil, err
	}
	l := s.lock(sb.ID)
	l.Lock()
	defer l.Unlock()
	ev := Event{SandboxID: sb.ID, Time: now, Type: EventCreated, To: StateCreating, Generation: sb.Generation, Message: msg}
	if err := s.RecordNewLocked(ctx, sb, ev); err != nil {
		s.ReleaseSlot(sb.Slot)
		return nil, fmt.Errorf("creating sandbox %q: %w", p.Name, err)
	}
	err = s.views.Copy(ctx, sb.Spec.Peers, viewsFrom)
	if err == nil {
		err = s.bootFrom(ctx, sb, ck, how)
	}
	if err != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		s.UndoCreateLocked(cctx, sb)
		return nil, fmt.Errorf("creating sandbox %q: %w", p.Name, err)
	}
	s.Touch(sb.ID)
	if err := s.TransitionLocked(ctx, sb, StateRunning, EventStarted, fmt.Sprintf("generation 1 from checkpoint %s", ck.ID)); err != nil {
		return nil, err
	}
	return sb, nil
}

// planViews gives a sandbox being made from ck, whose spec is spec and
// id is id, views of its own of the peers ck was taken with, and returns
// what each is to be copied from (peers.Plan): the views of ck's sandbox
// it had then if they are still there, else those it has now at the same
// mount points (its memory image needs views at the same places).
// Nothing is copied yet: views.Copy does, once the new sandbox's record
// names them, so an undo removes its views and never its origin's.
func (s *Service) planViews(ctx context.Context, id string, spec *Spec, ck *Checkpoint) ([]string, error) {
	if len(spec.Peers) == 0 {
		return nil, nil
	}
	var now []peers.Peer
	if src, err := s.cfg.Store.GetSandbox(ctx, ck.SandboxID); err == nil && src.State != StateDestroyed {
		now = src.Spec.Peers
	}
	kept := func(view string) bool {
		_, err := s.cfg.Volumes.Stat(ctx, view)
		return err == nil
	}
	plan, from, missing := peers.Plan(id, spec.Peers, now, kept, func() string { return NewID(8) })
	if missing != nil {
		return nil, errdefs.WithHint(errdefs.Conflict("checkpoint %s was taken with a view of %s at %s, which is gone", ck.ID, missing.Sandbox, missing.At),
			"its files alone can be booted: take a files-only checkpoint of a sandbox without that peer")
	}
	spec.Peers = plan
	return from, nil
}
