package export

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/grant"
	"github.com/den-dev/den/internal/idle"
	"github.com/den-dev/den/internal/netpolicy"
	"github.com/den-dev/den/internal/sandbox"
	"github.com/den-dev/den/internal/specs"
)

// cleanupTimeout bounds undoing a failed import, as the core's own undo
// is bounded.
const cleanupTimeout = 30 * time.Second

// Making sandboxes is what an import uses of the core beyond what an
// export does: a create's checks, admission and records, one step each,
// so that the import never reaches into the Service's state.
type Making interface {
	Node() string
	Now() time.Time
	CheckPolicy(ctx context.Context, p idle.Policy) error
	CheckReach(ctx context.Context, owner string, p netpolicy.Policy) error
	CheckSecretsSet(ctx context.Context, grants []grant.Grant) error
	CheckReserve(doing string) error
	NameFree(ctx context.Context, owner, name string) error
	DiskCap(asked int64) int64
	CheckDiskSize(ctx context.Context, capBytes int64) error
	Restorable(ck *sandbox.Checkpoint, sb *sandbox.Sandbox) error
	Admit(ctx context.Context, verb, owner string, l sandbox.Limits, n int) (release func(), err error)
	AllocSlot(ctx context.Context, id string) (int, error)
	ReleaseSlot(slot int)
	Lock(id string) (unlock func())
	RecordNewLocked(ctx context.Context, sb *sandbox.Sandbox, ev sandbox.Event) error
	AddCheckpointLocked(ctx context.Context, ck *sandbox.Checkpoint) error
	ForgetCheckpoint(ctx context.Context, id string) error
	DropCheckpointFiles(ctx context.Context, ck *sandbox.Checkpoint)
	UndoCreateLocked(ctx context.Context, sb *sandbox.Sandbox)
	RootFromLocked(ctx context.Context, sb *sandbox.Sandbox, volume string) error
	TransitionLocked(ctx context.Context, sb *sandbox.Sandbox, to sandbox.State, evType, msg string) error
}

// agent is an agent another den exported, to be made a sandbox of Owner
// here.
type agent struct {
	Name  string
	Owner string
	// Spec is its record there: image, limits, network, env, labels,
	// setup steps, kept paths and the secrets it is granted, by name.
	Spec   sandbox.Spec
	Policy idle.Policy
	// Manifest is its checkpoint's; Memory says a memory image comes
	// with the files.
	Manifest sandbox.Manifest
	Memory   bool
}

// makeSandbox makes a sandbox from an agent another den exported. It
// is checked as a create is (name, idle policy, labels, a network within
// the owner's grants, setup steps, limits, disk, quota) and every secret
// it is granted must be set here, before anything is made. Then fill
// receives the checkpoint's files into read-only volume ck.VolumeKey()
// and, with p.Memory, its memory image into MemoryDir(ck.ID). With
// memory the sandbox sleeps hibernated in ck and wakes with its
// processes on first use; without, it is stopped with ck's files and
// boots on start. Like Create, a failure leaves nothing behind.
func (s *Service) makeSandbox(ctx context.Context, p agent, fill func(ck *sandbox.Checkpoint) error) (*sandbox.Sandbox, error) {
	spec, err := s.checkImport(ctx, &p)
	if err != nil {
		return nil, err
	}
	release, err := s.svc.Admit(ctx, "import sandbox", p.Owner, spec.Limits(), 1)
	if err != nil {
		return nil, err
	}
	defer release()
	now := s.svc.Now().UTC()
	sb := &sandbox.Sandbox{
		ID: sandbox.NewID(12), Name: p.Name, Spec: spec, State: sandbox.StateCreating, Generation: 1, Token: sandbox.NewToken(),
		Node: s.svc.Node(), Owner: p.Owner, Policy: p.Policy, CreatedAt: now, UpdatedAt: now,
	}
	ck := &sandbox.Checkpoint{ID: sandbox.NewID(12), SandboxID: sb.ID, Kind: sandbox.CheckpointManual, Name: "imported", Memory: p.Memory,
		Generation: 1, Manifest: p.Manifest, CreatedAt: now, Location: sandbox.LocationLocal}
	ck.Manifest.Spec = spec
	if p.Memory {
		ck.Kind, ck.Name = sandbox.CheckpointHibernate, ""
	}
	if sb.Slot, err = s.svc.AllocSlot(ctx, sb.ID); err != nil {
		return nil, err
	}
	defer s.svc.Lock(sb.ID)()
	ev := sandbox.Event{SandboxID: sb.ID, Time: now, Type: sandbox.EventCreated, To: sandbox.StateCreating, Generation: sb.Generation,
		Message: fmt.Sprintf("imported from another den (its checkpoint as %s)", ck.ID)}
	if err := s.svc.RecordNewLocked(ctx, sb, ev); err != nil {
		s.svc.ReleaseSlot(sb.Slot)
		return nil, fmt.Errorf("importing sandbox %q: %w", p.Name, err)
	}
	defer s.svc.Pin(ck.ID)()
	if err := s.fillImported(ctx, sb, ck, fill); err != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		if derr := s.svc.ForgetCheckpoint(cctx, ck.ID); derr != nil && !errors.Is(derr, errdefs.ErrNotFound) {
			s.log.Error("undoing import: removing the checkpoint's record", "checkpoint", ck.ID, "err", derr)
		}
		s.svc.DropCheckpointFiles(cctx, ck)
		s.svc.UndoCreateLocked(cctx, sb)
		return nil, fmt.Errorf("importing sandbox %q: %w", p.Name, err)
	}
	return sb, nil
}

// checkImport refuses what a create would refuse, and an agent whose
// secrets are not all set here, naming each; it returns the spec the
// sandbox gets.
func (s *Service) checkImport(ctx context.Context, p *agent) (sandbox.Spec, error) {
	spec := p.Spec
	if err := specs.ValidateName("sandbox", p.Name); err != nil {
		return spec, err
	}
	if err := s.svc.CheckPolicy(ctx, p.Policy); err != nil {
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
	if err := s.svc.CheckReach(ctx, p.Owner, spec.Network); err != nil {
		return spec, err
	}
	if err := grant.Validate(spec.Secrets); err != nil {
		return spec, err
	}
	if err := s.missingSecrets(ctx, spec.Secrets); err != nil {
		return spec, err
	}
	if err := specs.ValidateSetup(spec.Setup, spec.Keep); err != nil {
		return spec, err
	}
	if err := spec.Validate(); err != nil {
		return spec, err
	}
	if err := s.svc.CheckReserve("import a sandbox"); err != nil {
		return spec, err
	}
	if err := s.svc.NameFree(ctx, p.Owner, p.Name); err != nil {
		return spec, err
	}
	spec.DiskBytes = s.svc.DiskCap(spec.DiskBytes)
	if err := s.svc.CheckDiskSize(ctx, spec.DiskBytes); err != nil {
		return spec, err
	}
	if p.Memory {
		probe := &sandbox.Sandbox{Name: p.Name, Spec: spec}
		if err := s.svc.Restorable(&sandbox.Checkpoint{ID: "in the archive", Memory: true, Manifest: p.Manifest}, probe); err != nil {
			return spec, errdefs.WithHint(err, "export it again with --fs-only to move its files alone")
		}
	}
	return spec, nil
}

// missingSecrets refuses grants of secrets not set here, naming them all.
func (s *Service) missingSecrets(ctx context.Context, grants []grant.Grant) error {
	var missing []string
	for _, g := range grants {
		err := s.svc.CheckSecretsSet(ctx, []grant.Grant{g})
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
func (s *Service) fillImported(ctx context.Context, sb *sandbox.Sandbox, ck *sandbox.Checkpoint, fill func(ck *sandbox.Checkpoint) error) error {
	if err := fill(ck); err != nil {
		return err
	}
	if ck.Memory {
		if err := s.svc.VerifyImage(ck); err != nil {
			return err
		}
		if err := s.svc.AddCheckpointLocked(ctx, ck); err != nil {
			return fmt.Errorf("recording its checkpoint: %w", err)
		}
		sb.Checkpoint = ck.ID
		return s.svc.TransitionLocked(ctx, sb, sandbox.StateHibernated, sandbox.EventHibernated,
			fmt.Sprintf("imported with its processes in checkpoint %s; it wakes on first use", ck.ID))
	}
	if err := s.svc.RootFromLocked(ctx, sb, ck.VolumeKey()); err != nil {
		return err
	}
	if err := s.svc.AddCheckpointLocked(ctx, ck); err != nil {
		return fmt.Errorf("recording its checkpoint: %w", err)
	}
	sb.Head, sb.Origin = ck.ID, ck.ID
	return s.svc.TransitionLocked(ctx, sb, sandbox.StateStopped, sandbox.EventStopped,
		fmt.Sprintf("imported with its files in checkpoint %s (imported); `den start %s` boots it", ck.ID, sb.Name))
}
