package sandbox

import "context"

// Steps that recovery (internal/recovery) takes, when dend starts, to
// make the records and this host agree again, and that nothing in the
// core needs under these names: each is one of the core's own steps, so
// that recovery never reaches into the Service's state. The caller of a
// step ending in Locked holds sb's lifecycle lock (Lock, WithSandbox).
// The steps it takes as the core does (UndoCreateLocked,
// SuperviseLocked, LoseLocked, DestroyLocked, ...) are exported where
// they are defined.

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

// WakeRunsLocked collects again the runs of sb, just come back from a
// hibernation with its processes.
func (s *Service) WakeRunsLocked(ctx context.Context, sb *Sandbox) error {
	return s.wakeRuns(ctx, sb, s.GuestFor(sb))
}

// HaltLocked ends sb's current instance at once, its engine sandbox and
// namespace going too. Errors are logged.
func (s *Service) HaltLocked(ctx context.Context, sb *Sandbox) { s.halt(ctx, sb, 0) }

// Ping asks den-init of sb's current instance, with sb's token, whether
// it answers.
func (s *Service) Ping(ctx context.Context, sb *Sandbox) error {
	_, err := s.GuestFor(sb).Ping(ctx)
	return err
}

// RekeyFrom gives sb's token to den-init of sb's current instance, which
// answers to oldToken (a restore finished, dend stopped before it gave
// den-init sb's token), and returns what den-init said.
func (s *Service) RekeyFrom(ctx context.Context, sb *Sandbox, oldToken string) error {
	old := s.DialGuest(sb, oldToken)
	defer CloseGuest(old)
	_, err := old.Rekey(ctx, sb.Token, nil)
	return err
}
