package sandbox

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/grant"
	"github.com/den-dev/den/internal/idle"
)

// ImportParams is an agent another den exported (internal/export), to be
// made a sandbox of Owner here.
type ImportParams struct {
	Name  string
	Owner string
	// Spec is its record there: image, limits, network, env, labels,
	// setup steps, kept paths and the secrets it is granted, by name.
	Spec   Spec
	Policy idle.Policy
	// Manifest is its checkpoint's; Memory says a memory image comes
	// with the files.
	Manifest Manifest
	Memory   bool
}

// ImportSandbox makes a sandbox from an agent another den exported. It
// is checked as a create is (name, idle policy, labels, a network within
// the owner's grants, setup steps, limits, disk, quota) and every secret
// it is granted must be set here, before anything is made. Then fill
// receives the checkpoint's files into read-only volume ck.VolumeKey()
// and, with p.Memory, its memory image into MemoryDir(ck.ID). With
// memory the sandbox sleeps hibernated in ck and wakes with its
// processes on first use; without, it is stopped with ck's files and
// boots on start. Like Create, a failure leaves nothing behind.
func (s *Service) ImportSandbox(ctx context.Context, p ImportParams, fill func(ck *Checkpoint) error) (*Sandbox, error) {
	spec, err := s.checkImport(ctx, &p)
	if err != nil {
		return nil, err
	}
	release, err := s.admit(ctx, "import sandbox", p.Owner, spec.Limits(), 1)
	if err != nil {
		return nil, err
	}
	defer release()
	now := s.cfg.Now().UTC()
	sb := &Sandbox{
		ID: newID(12), Name: p.Name, Spec: spec, State: StateCreating, Generation: 1, Token: newToken(),
		Node: s.cfg.Node, Owner: p.Owner, Policy: p.Policy, CreatedAt: now, UpdatedAt: now,
	}
	ck := &Checkpoint{ID: newID(12), SandboxID: sb.ID, Kind: CheckpointManual, Name: "imported", Memory: p.Memory,
		Generation: 1, Manifest: p.Manifest, CreatedAt: now, Location: LocationLocal}
	ck.Manifest.Spec = spec
	if p.Memory {
		ck.Kind, ck.Name = CheckpointHibernate, ""
	}
	if sb.Slot, err = s.allocSandboxSlot(ctx, sb.ID); err != nil {
		return nil, err
	}
	l := s.lock(sb.ID)
	l.Lock()
	defer l.Unlock()
	ev := Event{SandboxID: sb.ID, Time: now, Type: EventCreated, To: StateCreating, Generation: sb.Generation,
		Message: fmt.Sprintf("imported from another den (its checkpoint as %s)", ck.ID)}
	if err := s.recordNew(ctx, sb, ev); err != nil {
		s.releaseSlot(sb.Slot)
		return nil, fmt.Errorf("importing sandbox %q: %w", p.Name, err)
	}
	defer s.pin(ck.ID)()
	if err := s.fillImported(ctx, sb, ck, fill); err != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		if derr := s.cfg.Store.DeleteCheckpoint(cctx, ck.ID); derr != nil && !errors.Is(derr, errdefs.ErrNotFound) {
			s.log.Error("undoing import: removing the checkpoint's record", "checkpoint", ck.ID, "err", derr)
		}
		s.dropCheckpointFiles(cctx, ck)
		s.undoCreate(cctx, sb)
		return nil, fmt.Errorf("importing sandbox %q: %w", p.Name, err)
	}
	return sb, nil
}

// checkImport refuses what a create would refuse, and an agent whose
// secrets are not all set here, naming each; it returns the spec the
// sandbox gets.
func (s *Service) checkImport(ctx context.Context, p *ImportParams) (Spec, error) {
	spec := p.Spec
	if err := ValidateName("sandbox", p.Name); err != nil {
		return spec, err
	}
	if err := p.Policy.ValidateOwn(idle.Floor(ctx, s.cfg.MinTTL)); err != nil {
		return spec, err
	}
	if p.Memory && (len(spec.Peers) > 0 || p.Manifest.Sealed != "") {
		return spec, errdefs.WithHint(errdefs.Invalid("the archive's memory image cannot come back here (it has views of other sandboxes, or is sealed)"),
			"export it again with --fs-only")
	}
	// What belongs to the den it left: its exposed ports and views.
	spec.Ports, spec.Peers, spec.Ephemeral = nil, nil, false
	if err := spec.Network.Validate(); err != nil {
		return spec, err
	}
	if err := s.checkReach(ctx, p.Owner, spec.Network); err != nil {
		return spec, err
	}
	if err := grant.Validate(spec.Secrets); err != nil {
		return spec, err
	}
	if err := s.missingSecrets(ctx, spec.Secrets); err != nil {
		return spec, err
	}
	if err := ValidateSetup(spec.Setup, spec.Keep); err != nil {
		return spec, err
	}
	if err := spec.Validate(); err != nil {
		return spec, err
	}
	if err := s.checkReserve("import a sandbox"); err != nil {
		return spec, err
	}
	if err := s.nameFree(ctx, p.Owner, p.Name); err != nil {
		return spec, err
	}
	spec.DiskBytes = s.diskCap(spec.DiskBytes)
	if err := s.checkDiskSize(ctx, spec.DiskBytes); err != nil {
		return spec, err
	}
	if p.Memory {
		probe := &Sandbox{Name: p.Name, Spec: spec}
		if err := s.restorable(&Checkpoint{ID: "in the archive", Memory: true, Manifest: p.Manifest}, probe); err != nil {
			return spec, errdefs.WithHint(err, "export it again with --fs-only to move its files alone")
		}
	}
	return spec, nil
}

// missingSecrets refuses grants of secrets not set here, naming them all.
func (s *Service) missingSecrets(ctx context.Context, grants []grant.Grant) error {
	var missing []string
	for _, g := range grants {
		err := grant.CheckSet(ctx, s.cfg.Secrets, []grant.Grant{g})
		switch {
		case errors.Is(err, errdefs.ErrNotFound):
			missing = append(missing, g.Name)
		case err != nil:
			return err
		}
	}
	if len(missing) == 0 {
		return nil
	}
	var sets []string
	for _, n := range missing {
		sets = append(sets, "`den secret set "+n+"`")
	}
	return errdefs.WithHint(errdefs.Conflict("the agent needs secrets not set on this den: %s; nothing was imported", strings.Join(missing, ", ")),
		"set them first ("+strings.Join(sets, ", ")+"), then import again")
}

// fillImported receives ck's bytes and makes sb of them: hibernated in
// ck when it holds memory, else stopped with ck's files.
func (s *Service) fillImported(ctx context.Context, sb *Sandbox, ck *Checkpoint, fill func(ck *Checkpoint) error) error {
	if err := fill(ck); err != nil {
		return err
	}
	if ck.Memory {
		if err := s.verifyImage(ck); err != nil {
			return err
		}
		if err := s.cfg.Store.CreateCheckpoint(ctx, ck); err != nil {
			return fmt.Errorf("recording its checkpoint: %w", err)
		}
		sb.Checkpoint = ck.ID
		return s.transition(ctx, sb, StateHibernated, EventHibernated,
			fmt.Sprintf("imported with its processes in checkpoint %s; it wakes on first use", ck.ID))
	}
	if _, err := s.cfg.Volumes.Snapshot(ctx, ck.VolumeKey(), sb.VolumeKey(), false); err != nil {
		return fmt.Errorf("making its root filesystem: %w", err)
	}
	if err := s.capDisk(ctx, sb); err != nil {
		return err
	}
	if err := s.cfg.Store.CreateCheckpoint(ctx, ck); err != nil {
		return fmt.Errorf("recording its checkpoint: %w", err)
	}
	sb.Head, sb.Origin = ck.ID, ck.ID
	return s.transition(ctx, sb, StateStopped, EventStopped,
		fmt.Sprintf("imported with its files in checkpoint %s (imported); `den start %s` boots it", ck.ID, sb.Name))
}
