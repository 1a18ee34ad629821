package sandbox

import (
	"context"
	"errors"
	"fmt"

	"github.com/den-dev/den/internal/errdefs"
)

// A rebase gives a sandbox a new root from an image version while it
// keeps what is its own (see internal/rebase, which composes the verb
// from the core's steps). What the core keeps of it: the steps a rebase
// takes under the sandbox's lifecycle lock that reach the engine and the
// volumes. Settling, when dend starts, a sandbox whose rebase it was in
// the middle of is internal/recovery's (recoverRebase).

// ImageAt names an image version as IMAGE@VERSION.
func ImageAt(name string, version int) string { return fmt.Sprintf("%s@%d", name, max(version, 1)) }

// ImageVersion returns version of image name (0: the newest), whose
// root filesystem is on this host; ErrNotFound names what is missing.
func (s *Service) ImageVersion(ctx context.Context, name string, version int) (*Image, error) {
	return s.cfg.Images.Version(ctx, name, version)
}

// NextGenerationLocked ends sb's instance, unless it is stopped, marks
// its open runs lost, and gives sb its next generation and a new token,
// not yet recorded: the caller records what the generation boots on,
// then gives it a root (NewRootLocked) and boots it (BootLocked). The
// caller holds sb's lifecycle lock.
func (s *Service) NextGenerationLocked(ctx context.Context, sb *Sandbox) error {
	if sb.State != StateStopped {
		s.halt(context.WithoutCancel(ctx), sb, 0)
	}
	if err := s.LoseRunsLocked(ctx, sb); err != nil {
		return err
	}
	sb.Generation++
	sb.Token = NewToken()
	return nil
}

// NewRootLocked replaces sb's root with a fresh snapshot of image im and
// returns where the new root is on this host. The caller holds sb's
// lifecycle lock, and caps the root's disk (CapDiskLocked) once it has
// put in it what it keeps.
func (s *Service) NewRootLocked(ctx context.Context, sb *Sandbox, im *Image) (string, error) {
	if err := s.cfg.Volumes.Remove(ctx, sb.VolumeKey()); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		return "", fmt.Errorf("removing the old root: %w", err)
	}
	if _, err := s.cfg.Volumes.Snapshot(ctx, im.VolumeKey(), sb.VolumeKey(), false); err != nil {
		return "", fmt.Errorf("making the new root: %w", err)
	}
	return s.cfg.Volumes.Path(sb.VolumeKey()), nil
}

// CheckpointRoot is where the files of checkpoint ck are on this host:
// a read-only snapshot of its sandbox's root.
func (s *Service) CheckpointRoot(ck *Checkpoint) string { return s.cfg.Volumes.Path(ck.VolumeKey()) }

// RunSetupLocked runs sb's setup steps in its running instance, in order,
// and stops at the first that fails, returning a *SetupError; the caller
// holds sb's lifecycle lock.
func (s *Service) RunSetupLocked(ctx context.Context, sb *Sandbox) ([]StepResult, error) {
	res, err := s.runSetup(ctx, sb)
	if err == nil {
		s.services.Boot(ctx, sb) // its services start after its steps
	}
	return res, err
}

// FillLatest sets ImageLatest on each sandbox from the image records.
func (s *Service) FillLatest(ctx context.Context, sbs ...*Sandbox) error {
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
