package export

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/imagecrypt"
	"github.com/den-dev/den/internal/sandbox"
)

// Sandboxes is what export and import use of the core: its exported
// verbs and steps.
type Sandboxes interface {
	Get(ctx context.Context, ref string) (*sandbox.Sandbox, error)
	Checkpoint(ctx context.Context, ref string, p sandbox.CheckpointParams) (*sandbox.Checkpoint, error)
	WithSandbox(ctx context.Context, ref string, f func(sb *sandbox.Sandbox) error) error
	AdmitCheckpoint(ctx context.Context, sb *sandbox.Sandbox) (release func(), err error)
	CheckpointFilesLocked(ctx context.Context, sb *sandbox.Sandbox, name string) (*sandbox.Checkpoint, error)
	CheckpointOf(ctx context.Context, sb *sandbox.Sandbox, ref string) (*sandbox.Checkpoint, error)
	Record(ctx context.Context, sb *sandbox.Sandbox, evType, msg string) error
	Pin(id string) (unpin func())
	EnsureLocal(ctx context.Context, ck *sandbox.Checkpoint) error
	VerifyImage(ck *sandbox.Checkpoint) error
	MemoryDir(ckID string) string
	ImageVersion(ctx context.Context, name string, version int) (*sandbox.Image, error)
	Making
}

// Mover streams the storage pool's volumes and memory images, as
// *offsite.Offsite does for the fleet.
type Mover interface {
	Format() string
	SendVolume(ctx context.Context, key, base string, w io.Writer) error
	ReceiveVolume(ctx context.Context, key string, r io.Reader, whole func() error) error
	SendDir(dir string, w io.Writer) error
	ReceiveDir(dir string, r io.Reader) error
}

// Config is what a Service needs.
type Config struct {
	Sandboxes Sandboxes
	Mover     Mover
	Logger    *slog.Logger
	Now       func() time.Time
}

// Service exports and imports agents.
type Service struct {
	svc   Sandboxes
	mover Mover
	log   *slog.Logger
	now   func() time.Time
}

// New makes a Service of cfg.
func New(cfg Config) *Service {
	s := &Service{svc: cfg.Sandboxes, mover: cfg.Mover, log: cfg.Logger, now: cfg.Now}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	return s
}

// Export is a checkpoint held for writing an archive of it; Close lets
// it go.
type Export struct {
	s      *Service
	hdr    Header
	ck     *sandbox.Checkpoint
	unpin  func()
	volume string
}

// Prepare picks, or takes, the checkpoint an export of sandbox ref
// writes: a fresh one of a running or paused sandbox (files only with
// fsOnly, else with memory, refused as a checkpoint is while a process
// holds secrets), the one a hibernated sandbox sleeps in, or a
// files-only one of a stopped sandbox. A memory export of a sandbox
// ever granted secrets is refused: its memory images are sealed under
// this dend's key, which does not leave it.
func (s *Service) Prepare(ctx context.Context, ref string, fsOnly bool) (*Export, error) {
	sb, err := s.svc.Get(ctx, ref)
	if err != nil {
		return nil, err
	}
	if why := memoryStays(sb); !fsOnly && why != "" {
		return nil, errdefs.WithHint(errdefs.Conflict("the memory of sandbox %q cannot be exported: %s", sb.Name, why),
			fmt.Sprintf("export its files alone: `den export %s --fs-only`", sb.Name))
	}
	label := fmt.Sprintf("export-%s-%s", s.now().UTC().Format("20060102-150405"), sandbox.NewID(4))
	var ck *sandbox.Checkpoint
	var unpin func()
	switch sb.State {
	case sandbox.StateRunning, sandbox.StatePaused:
		ck, err = s.svc.Checkpoint(ctx, sb.ID, sandbox.CheckpointParams{Name: label, FSOnly: fsOnly})
		if err == nil {
			unpin = s.svc.Pin(ck.ID)
		}
	default:
		err = s.svc.WithSandbox(ctx, sb.ID, func(sb *sandbox.Sandbox) error {
			var err error
			ck, err = s.lockedPoint(ctx, sb, label)
			if err == nil {
				unpin = s.svc.Pin(ck.ID)
			}
			return err
		})
	}
	if err != nil {
		return nil, fmt.Errorf("exporting sandbox %q: %w", sb.Name, err)
	}
	x := &Export{s: s, ck: ck, unpin: unpin, volume: ck.VolumeKey()}
	if err := x.check(ctx, fsOnly); err != nil {
		x.Close()
		return nil, fmt.Errorf("exporting sandbox %q: %w", sb.Name, err)
	}
	x.hdr = Header{Version: ArchiveVersion, Name: sb.Name, Spec: sb.Spec, Policy: sb.Policy, Format: s.mover.Format(),
		Memory: ck.Memory && !fsOnly, Manifest: ck.Manifest, Checkpoint: ck.ID, ExportedAt: s.now().UTC()}
	if im, err := s.svc.ImageVersion(ctx, sb.Spec.Image, sb.Spec.ImageVersion); err == nil {
		x.hdr.ImageDigest = im.Digest
	}
	return x, nil
}

// memoryStays says why sb's memory may not leave this den, or "".
func memoryStays(sb *sandbox.Sandbox) string {
	switch {
	case sb.Spec.SecretsGranted || len(sb.Spec.Secrets) > 0:
		return "it was granted secrets, and its memory images are sealed under this den's key, which stays here"
	case len(sb.Spec.Peers) > 0:
		return "it has views of other sandboxes, which stay on this den"
	}
	return ""
}

// lockedPoint is the checkpoint of sb, not running, an export writes:
// the one it sleeps in, or a new files-only one of a stopped sandbox.
func (s *Service) lockedPoint(ctx context.Context, sb *sandbox.Sandbox, label string) (*sandbox.Checkpoint, error) {
	switch sb.State {
	case sandbox.StateHibernated:
		return s.svc.CheckpointOf(ctx, sb, sb.Checkpoint)
	case sandbox.StateStopped:
		release, err := s.svc.AdmitCheckpoint(ctx, sb)
		if err != nil {
			return nil, err
		}
		defer release()
		ck, err := s.svc.CheckpointFilesLocked(ctx, sb, label)
		if err != nil {
			return nil, err
		}
		sb.Head = ck.ID
		return ck, s.svc.Record(ctx, sb, sandbox.EventCheckpoint, "checkpoint "+ck.Description()+" to export it")
	}
	return nil, sandbox.Require(sb, "export", sandbox.StateRunning, sandbox.StatePaused, sandbox.StateHibernated, sandbox.StateStopped)
}

// check makes sure the checkpoint's bytes are here and whole.
func (x *Export) check(ctx context.Context, fsOnly bool) error {
	if err := x.s.svc.EnsureLocal(ctx, x.ck); err != nil {
		return err
	}
	if !x.ck.Memory || fsOnly {
		return nil
	}
	if x.ck.Manifest.Sealed != "" {
		return errdefs.WithHint(errdefs.Conflict("its memory image is sealed under this den's images key"), "export its files alone with --fs-only")
	}
	return x.s.svc.VerifyImage(x.ck)
}

// Header is what the archive will say.
func (x *Export) Header() Header { return x.hdr }

// WriteTo writes the archive, sealed under key, to w.
func (x *Export) WriteTo(ctx context.Context, w io.Writer, key *imagecrypt.Key) error {
	files := func(w io.Writer) error { return x.s.mover.SendVolume(ctx, x.volume, "", w) }
	memory := func(w io.Writer) error { return x.s.mover.SendDir(x.s.svc.MemoryDir(x.ck.ID), w) }
	return Write(w, key, &x.hdr, files, memory)
}

// Close lets the checkpoint go.
func (x *Export) Close() {
	if x.unpin != nil {
		x.unpin()
		x.unpin = nil
	}
}

// ImportParams says whose the imported sandbox is and its name ("": the
// archive's).
type ImportParams struct {
	Name  string
	Owner string
}

// Result is what an import made.
type Result struct {
	Sandbox *sandbox.Sandbox
	Header  Header
	// ImageNote says, when it is so, that this dend lacks the image the
	// agent was made from: its files are whole, but a rebase needs it.
	ImageNote string
}

// Import reads an archive sealed under key from r and makes the agent
// it holds a sandbox of p.Owner: hibernated with its processes, or
// stopped with its files. A damaged, cut or altered archive, the wrong
// key, or anything a create would refuse leaves nothing behind.
func (s *Service) Import(ctx context.Context, r io.Reader, key *imagecrypt.Key, p ImportParams) (*Result, error) {
	a, err := Open(r, key)
	if err != nil {
		return nil, err
	}
	defer a.Close()
	hdr := a.Header
	if hdr.Format != s.mover.Format() {
		return nil, errdefs.WithHint(errdefs.Invalid("the archive's files are a %s stream, and this dend's storage pool takes %s", hdr.Format, s.mover.Format()),
			"import it on a dend with the same storage driver as the one that exported it")
	}
	res := &Result{Header: hdr}
	spec := hdr.Spec
	res.ImageNote = s.matchImage(ctx, &spec, hdr.ImageDigest)
	ip := agent{Name: cmp.Or(p.Name, hdr.Name), Owner: p.Owner, Spec: spec, Policy: hdr.Policy,
		Manifest: hdr.Manifest, Memory: hdr.Memory}
	res.Sandbox, err = s.makeSandbox(ctx, ip, func(ck *sandbox.Checkpoint) error {
		if err := s.receive(ctx, a, ck); err != nil {
			return a.abandon(err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// receive makes ck's volume and memory image of the archive's sections,
// and checks the archive authenticated to its end.
func (s *Service) receive(ctx context.Context, a *Archive, ck *sandbox.Checkpoint) error {
	if err := s.mover.ReceiveVolume(ctx, ck.VolumeKey(), a.Section(), func() error { return nil }); err != nil {
		return err
	}
	if ck.Memory {
		if err := s.mover.ReceiveDir(s.svc.MemoryDir(ck.ID), a.Section()); err != nil {
			return err
		}
	}
	return a.Finish()
}

// matchImage points spec at this dend's version of its image when its
// newest has the same digest, and otherwise says the image is missing.
func (s *Service) matchImage(ctx context.Context, spec *sandbox.Spec, digest string) string {
	im, err := s.svc.ImageVersion(ctx, spec.Image, 0)
	if err == nil && digest != "" && im.Digest == digest {
		spec.ImageVersion = im.Version
		return ""
	}
	what := spec.Image
	if digest != "" {
		what += " (" + digest + ")"
	}
	if errors.Is(err, errdefs.ErrNotFound) || err == nil {
		return fmt.Sprintf("image %s is not on this dend: the sandbox's files are whole, but `den rebase` needs the image (build, import or pull it)", what)
	}
	return ""
}
