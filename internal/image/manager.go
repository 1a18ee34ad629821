// Package image manages den's base images: read-only root filesystems in
// the storage pool, each with a record in the store. An image is built from
// a recipe (the built-in "debian", "busybox" and "e2b-base"), imported from a
// `docker save` or OCI image-layout tarball, or pulled from a registry.
// Sandboxes start as writable snapshots of one.
//
// Every operation is all-or-nothing: the image is written into a fresh
// volume, sealed, and only then recorded; any failure, a cancelled context
// included, removes the volume and records nothing.
package image

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"
	"golang.org/x/sys/unix"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/sandbox"
	"github.com/den-dev/den/internal/specs"
)

// Pool is the part of the storage pool the manager uses. Create makes an
// empty writable volume and returns its path; Seal makes it read-only;
// Remove deletes it (errdefs.ErrNotFound when absent); Usage is the bytes
// it holds.
type Pool interface {
	Create(ctx context.Context, key string) (string, error)
	Seal(ctx context.Context, key string) error
	Remove(ctx context.Context, key string) error
	Path(key string) string
	Usage(ctx context.Context, key string) (int64, error)
}

// Records is the part of sandbox.Store the manager uses: the images, and
// the sandboxes and checkpoints that tell which older versions are used.
type Records interface {
	PutImage(ctx context.Context, im *sandbox.Image) error
	// GetImage fails with errdefs.ErrNotFound when there is no such image.
	GetImage(ctx context.Context, name string) (*sandbox.Image, error)
	ListImages(ctx context.Context) ([]*sandbox.Image, error)
	DeleteImage(ctx context.Context, name string) error
	GetImageVersion(ctx context.Context, name string, version int) (*sandbox.Image, error)
	ListImageVersions(ctx context.Context, name string) ([]*sandbox.Image, error)
	DeleteImageVersion(ctx context.Context, name string, version int) error
	ListSandboxes(ctx context.Context) ([]*sandbox.Sandbox, error)
	ListCheckpoints(ctx context.Context, sandboxID string) ([]*sandbox.Checkpoint, error)
}

// Progress reports how far a long operation is. Phase names the step
// ("bootstrap", "read", "download", "extract"); Current and Total count
// bytes or layers, Total 0 when unknown.
type Progress struct {
	Phase   string
	Message string
	Current int64
	Total   int64
}

// Config configures a Manager.
type Config struct {
	Pool    Pool
	Records Records
	Logger  *slog.Logger

	// Mirror is the Debian mirror the debian image is built from. Default:
	// the host's apt sources, else http://deb.debian.org/debian.
	Mirror string
	// Suite is the Debian release of the debian image. Default: bookworm.
	Suite string
	// CacheDir, if set, keeps downloaded Debian packages between builds.
	CacheDir string

	// TempDir holds import archives while they are read. Default:
	// os.TempDir().
	TempDir string
	// MaxImageBytes caps the file bytes of an imported or pulled image.
	// 0: no cap but the disk.
	MaxImageBytes int64
	// Busybox is the host's static busybox. Default: /bin/busybox.
	Busybox string
}

// Default values.
const (
	DefaultMirror  = "http://deb.debian.org/debian"
	DefaultSuite   = "bookworm"
	DefaultBusybox = "/bin/busybox"
	aptSourcesDir  = "/etc/apt"
)

// Validate checks the configuration after defaults are applied.
func (c *Config) Validate() error {
	switch {
	case c.Pool == nil:
		return errors.New("image config: Pool is required")
	case c.Records == nil:
		return errors.New("image config: Records is required")
	case c.MaxImageBytes < 0:
		return fmt.Errorf("image config: MaxImageBytes %d is negative", c.MaxImageBytes)
	}
	return nil
}

func (c *Config) setDefaults() {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Suite == "" {
		c.Suite = DefaultSuite
	}
	if c.Mirror == "" {
		c.Mirror = mirrorFromSources(aptSourcesDir, c.Suite)
	}
	if c.TempDir == "" {
		c.TempDir = os.TempDir()
	}
	if c.Busybox == "" {
		c.Busybox = DefaultBusybox
	}
}

// Manager builds, imports, pulls, lists and removes images.
type Manager struct {
	cfg    Config
	log    *slog.Logger
	flight singleflight.Group // Ensure and Build of one name build once
	locks  nameLocks          // one operation at a time per name
	http   *http.Client       // reads the Debian mirror's index
	self   func() ([]byte, error)
}

var _ sandbox.Images = (*Manager)(nil)

// NewManager returns a Manager over cfg's pool and records.
func NewManager(cfg Config) (*Manager, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Manager{
		cfg: cfg, log: cfg.Logger, locks: nameLocks{m: map[string]chan struct{}{}},
		http: &http.Client{}, self: sync.OnceValues(executableSHA256),
	}, nil
}

// Log keys.
const (
	logImage   = "image"
	logSource  = "source"
	logBytes   = "bytes"
	logError   = "error"
	logCause   = "cause"
	logCount   = "count"
	logVersion = "version"
	logDir     = "dir"
)

// Sources of images, as recorded.
const (
	SourceBuiltin  = "builtin"
	SourceImported = "imported"
	SourcePulled   = "pulled"
)

// Ensure returns the image name, building it first if it is a built-in
// one that was never built.
func (m *Manager) Ensure(ctx context.Context, name string) (*sandbox.Image, error) {
	if err := specs.ValidateName("image", name); err != nil {
		return nil, err
	}
	im, err := m.cfg.Records.GetImage(ctx, name)
	if err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		return nil, fmt.Errorf("looking up image %q: %w", name, err)
	}
	if err == nil && m.here(im) {
		return im, nil
	}
	if _, ok := m.builtin(name); ok {
		return m.Build(ctx, name, false, nil)
	}
	if err == nil {
		// Recorded by another node of the fleet, whose pool holds it.
		return nil, errdefs.WithHint(errdefs.NotFound("image %q is not on this node: another node of the fleet made it", name),
			"make it here too (`den image pull` or `den image import` through this node), or create the sandbox through the node that has it")
	}
	return nil, notFound(name)
}

// here reports whether this host's pool holds the files of im.
func (m *Manager) here(im *sandbox.Image) bool {
	_, err := os.Stat(m.cfg.Pool.Path(im.VolumeKey()))
	return err == nil
}

func notFound(name string) error {
	return errdefs.WithHint(errdefs.NotFound("image %q not found", name),
		"list images with `den image ls`; get one with `den image pull REF` or `den image import FILE`")
}

// Get returns the record of image name.
func (m *Manager) Get(ctx context.Context, name string) (*sandbox.Image, error) {
	if err := specs.ValidateName("image", name); err != nil {
		return nil, err
	}
	im, err := m.cfg.Records.GetImage(ctx, name)
	if errors.Is(err, errdefs.ErrNotFound) {
		return nil, notFound(name)
	}
	if err != nil {
		return nil, fmt.Errorf("looking up image %q: %w", name, err)
	}
	return im, nil
}

// List returns every image.
func (m *Manager) List(ctx context.Context) ([]*sandbox.Image, error) {
	ims, err := m.cfg.Records.ListImages(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing images: %w", err)
	}
	return ims, nil
}

func volumeKey(name string, version int) string { return sandbox.ImageVolumeKey(name, version) }

// fillFunc writes an image's root filesystem into root and returns what is
// known of its record: Source, Ref, Digest, Env, Cwd, User.
type fillFunc func(ctx context.Context, root string) (*sandbox.Image, error)

// install makes the next version of image name from fill: a fresh volume,
// filled, sealed, then recorded as the newest version. On any failure the
// volume goes and nothing is recorded. Once it is recorded, older versions
// nothing uses go (see prune). The caller holds the name's lock.
func (m *Manager) install(ctx context.Context, name string, fill fillFunc) (im *sandbox.Image, err error) {
	version, err := m.nextVersion(ctx, name)
	if err != nil {
		return nil, err
	}
	key := volumeKey(name, version)
	// A volume without a record is what a crash mid-build leaves.
	if err := m.cfg.Pool.Remove(ctx, key); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		return nil, fmt.Errorf("removing leftover volume of image %q: %w", name, err)
	}
	root, err := m.cfg.Pool.Create(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("creating volume for image %q: %w", name, err)
	}
	defer func() {
		if err != nil {
			m.discard(ctx, key, err)
		}
	}()
	im, err = fill(ctx, root)
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		return nil, err
	}
	// The record says the image is whole: make it so on disk first.
	if err := syncFS(root); err != nil {
		return nil, fmt.Errorf("syncing image %q: %w", name, hostErr(err))
	}
	if err := m.cfg.Pool.Seal(ctx, key); err != nil {
		return nil, fmt.Errorf("sealing image %q: %w", name, err)
	}
	if im.SizeBytes, err = m.cfg.Pool.Usage(ctx, key); err != nil {
		return nil, fmt.Errorf("measuring image %q: %w", name, err)
	}
	im.Name, im.Version = name, version
	im.CreatedAt = time.Now().UTC()
	if err := m.cfg.Records.PutImage(ctx, im); err != nil {
		return nil, fmt.Errorf("recording image %q: %w", name, err)
	}
	m.log.Info("image ready", logImage, name, logVersion, version, logSource, im.Source, logBytes, im.SizeBytes)
	m.prune(ctx, name)
	return im, nil
}

// syncFS flushes the file system that holds dir.
func syncFS(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return unix.Syncfs(int(f.Fd()))
}

// discard removes the volume of a failed install, even when ctx is done.
func (m *Manager) discard(ctx context.Context, key string, cause error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	err := m.cfg.Pool.Remove(ctx, key)
	if err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		m.log.Error("removing volume of failed image", logImage, key, logCause, cause, logError, err)
	}
}

// hostErr drops host paths from the text of an os error, since users see
// it. Classified errors carry their own words and pass as they are.
func hostErr(err error) error {
	if err == nil || errdefs.Class(err) != nil {
		return err
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", pe.Op, pe.Err)
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return fmt.Errorf("%s: %w", le.Op, le.Err)
	}
	return err
}

// nameLocks serializes the operations on each image name.
type nameLocks struct {
	mu sync.Mutex
	m  map[string]chan struct{} // a name's lock is held while its channel is full
}

func (l *nameLocks) lock(ctx context.Context, name string) (unlock func(), err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	l.mu.Lock()
	ch, ok := l.m[name]
	if !ok {
		ch = make(chan struct{}, 1)
		l.m[name] = ch
	}
	l.mu.Unlock()
	select {
	case ch <- struct{}{}:
		return func() { <-ch }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// shared runs fn once for all concurrent callers with the same key. A
// caller whose context ends stops waiting, unless fn runs on its context:
// then fn is about to fail and the caller waits for it to clean up. A
// caller whose context is still live does not inherit another caller's
// cancellation: it tries again, with its own fn.
func (m *Manager) shared(ctx context.Context, key string, fn func() (*sandbox.Image, error)) (*sandbox.Image, error) {
	for attempt := 0; ; attempt++ {
		var led atomic.Bool
		ch := m.flight.DoChan(key, func() (any, error) {
			led.Store(true)
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			return fn()
		})
		var r singleflight.Result
		select {
		case r = <-ch:
		case <-ctx.Done():
			if !led.Load() {
				return nil, ctx.Err()
			}
			r = <-ch
		}
		cancelled := errors.Is(r.Err, context.Canceled) || errors.Is(r.Err, context.DeadlineExceeded)
		if cancelled && ctx.Err() == nil && attempt < 3 {
			continue
		}
		if r.Err != nil {
			return nil, r.Err
		}
		return r.Val.(*sandbox.Image), nil
	}
}
