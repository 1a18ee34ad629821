package checkpointing

import (
	"context"
	"strings"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/sandbox"
)

// Sandboxes is what the verbs use of the core (sandbox.Service).
type Sandboxes interface {
	// Get finds a sandbox by name or id.
	Get(ctx context.Context, ref string) (*sandbox.Sandbox, error)
	// WithSandbox runs f with sandbox ref under its lifecycle lock.
	WithSandbox(ctx context.Context, ref string, f func(sb *sandbox.Sandbox) error) error
	// CheckpointOf finds sb's checkpoint ref, an id or a name.
	CheckpointOf(ctx context.Context, sb *sandbox.Sandbox, ref string) (*sandbox.Checkpoint, error)
	// Needs names, by checkpoint id, the sandboxes that need it.
	Needs(ctx context.Context) (map[string][]string, error)
	// FillNeededBy sets ck.NeededBy and returns ck.
	FillNeededBy(ctx context.Context, ck *sandbox.Checkpoint) (*sandbox.Checkpoint, error)
	// DeleteCheckpointLocked removes ck of owner, whose lifecycle lock
	// the caller holds: its record and its files.
	DeleteCheckpointLocked(ctx context.Context, owner *sandbox.Sandbox, ck *sandbox.Checkpoint) error
}

// Records are the records the verbs read (sandbox.Store).
type Records interface {
	ListCheckpoints(ctx context.Context, sandboxID string) ([]*sandbox.Checkpoint, error)
}

// Config is what a Service needs.
type Config struct {
	Sandboxes Sandboxes
	Store     Records
}

// Service lists, reads and removes sandboxes' checkpoints.
type Service struct {
	svc   Sandboxes
	store Records
}

// New returns a Service of cfg.
func New(cfg Config) *Service {
	return &Service{svc: cfg.Sandboxes, store: cfg.Store}
}

// Checkpoints lists a sandbox's checkpoints, oldest first.
func (s *Service) Checkpoints(ctx context.Context, ref string) ([]*sandbox.Checkpoint, error) {
	sb, err := s.svc.Get(ctx, ref)
	if err != nil {
		return nil, err
	}
	cks, err := s.store.ListCheckpoints(ctx, sb.ID)
	if err != nil {
		return nil, err
	}
	needs, err := s.svc.Needs(ctx)
	if err != nil {
		return nil, err
	}
	for _, ck := range cks {
		ck.NeededBy = needs[ck.ID]
	}
	return cks, nil
}

// GetCheckpoint finds one of a sandbox's checkpoints by id or name.
func (s *Service) GetCheckpoint(ctx context.Context, ref, ckpt string) (*sandbox.Checkpoint, error) {
	sb, err := s.svc.Get(ctx, ref)
	if err != nil {
		return nil, err
	}
	ck, err := s.svc.CheckpointOf(ctx, sb, ckpt)
	if err != nil {
		return nil, err
	}
	return s.svc.FillNeededBy(ctx, ck)
}

// RemoveCheckpoint deletes a checkpoint that no sandbox depends on.
func (s *Service) RemoveCheckpoint(ctx context.Context, ref, ckpt string) error {
	return s.svc.WithSandbox(ctx, ref, func(sb *sandbox.Sandbox) error {
		ck, err := s.svc.CheckpointOf(ctx, sb, ckpt)
		if err != nil {
			return err
		}
		if ck, err = s.svc.FillNeededBy(ctx, ck); err != nil {
			return err
		}
		if len(ck.NeededBy) > 0 {
			return errdefs.WithHint(
				errdefs.Conflict("checkpoint %s of sandbox %q is needed by %s", ck.Description(), sb.Name, strings.Join(ck.NeededBy, ", ")),
				"a hibernated sandbox needs its checkpoint until it is resumed, and sandboxes created or forked from one need it until they are removed")
		}
		return s.svc.DeleteCheckpointLocked(ctx, sb, ck)
	})
}
