package sandbox

import "context"

// Steps that recovery (internal/recovery) takes, when dend starts, to
// make the records and this host agree again, and that nothing in the
// core needs under these names: each is one of the core's own steps, so
// that recovery never reaches into the Service's state. The caller of a
// step ending in Locked holds sb's lifecycle lock (Lock, WithSandbox).

// Lock holds the lifecycle lock of sandbox id, whose record the caller
// has already read, until unlock is called.
func (s *Service) Lock(id string) (unlock func()) {
	l := s.lock(id)
	l.Lock()
	return l.Unlock
}

// HoldSlots records the network slots of sbs, this node's sandboxes as
// dend finds them when it starts, as theirs.
func (s *Service) HoldSlots(sbs []*Sandbox) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sb := range sbs {
		s.slotTaken[sb.Slot] = sb.ID
	}
}

// ClearWarmLeftovers removes the warm-pool instances an earlier dend
// left; one a sandbox record names was being claimed, and is settled
// with the record.
func (s *Service) ClearWarmLeftovers(ctx context.Context) error {
	if s.warm == nil {
		return nil
	}
	return s.warm.ClearLeftovers(ctx)
}

// UndoCreateLocked removes every trace of sb, whose creation did not
// finish.
func (s *Service) UndoCreateLocked(ctx context.Context, sb *Sandbox) { s.undoCreate(ctx, sb) }

// SuperviseLocked watches sb's current instance, which lives, until it
// ends.
func (s *Service) SuperviseLocked(sb *Sandbox) { s.supervise(sb) }

// ResumeRunsLocked collects again the open runs of sb's current
// generation, whose instance lives, from where their output on the host
// ends; those of an earlier generation end as lost.
func (s *Service) ResumeRunsLocked(ctx context.Context, sb *Sandbox) error {
	return s.resumeRuns(ctx, sb)
}

// WakeRunsLocked collects again the runs of sb, just come back from a
// hibernation with its processes.
func (s *Service) WakeRunsLocked(ctx context.Context, sb *Sandbox) error {
	return s.wakeRuns(ctx, sb, s.guestFor(sb))
}

// LoseRunsLocked marks every open run of sb as lost.
func (s *Service) LoseRunsLocked(ctx context.Context, sb *Sandbox) error { return s.loseRuns(ctx, sb) }

// LoseLocked records that sb's instance is gone by itself: whatever is
// left of it goes, its open runs end as lost, and it is stopped with why.
func (s *Service) LoseLocked(ctx context.Context, sb *Sandbox, why string) error {
	return s.lose(ctx, sb, why)
}

// HaltLocked ends sb's current instance at once, its engine sandbox and
// namespace going too. Errors are logged.
func (s *Service) HaltLocked(ctx context.Context, sb *Sandbox) { s.halt(ctx, sb, 0) }

// DestroyLocked removes sb, as the remove verb does, why going into its
// history.
func (s *Service) DestroyLocked(ctx context.Context, sb *Sandbox, why string) error {
	return s.destroyLocked(ctx, sb, why)
}

// SalvageHibernationLocked completes sb's pending hibernation whose
// memory image the engine finished writing, and returns its checkpoint;
// ErrNotFound when the image is not whole.
func (s *Service) SalvageHibernationLocked(ctx context.Context, sb *Sandbox) (*Checkpoint, error) {
	return s.salvageHibernation(ctx, sb)
}

// FinishHibernateLocked releases, in the background, the engine instance
// and network of sb, whose hibernation checkpoint is complete, and ends
// its pending change; the caller records it hibernated.
func (s *Service) FinishHibernateLocked(ctx context.Context, sb *Sandbox) { s.finishHibernate(ctx, sb) }

// Ping asks den-init of sb's current instance, with sb's token, whether
// it answers.
func (s *Service) Ping(ctx context.Context, sb *Sandbox) error {
	_, err := s.guestFor(sb).Ping(ctx)
	return err
}

// RekeyFrom gives sb's token to den-init of sb's current instance, which
// answers to oldToken (a restore finished, dend stopped before it gave
// den-init sb's token), and returns what den-init said.
func (s *Service) RekeyFrom(ctx context.Context, sb *Sandbox, oldToken string) error {
	old := s.dialWith(sb, oldToken)
	defer closeGuest(old)
	_, err := old.Rekey(ctx, sb.Token, nil)
	return err
}
