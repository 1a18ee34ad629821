package sandbox

import (
	"context"
	"io"
	"net/netip"
	"syscall"
	"time"

	"github.com/den-dev/den/internal/guest"
	"github.com/den-dev/den/internal/netpolicy"
	"github.com/den-dev/den/internal/peers"
	"github.com/den-dev/den/internal/transfer"
)

// Store keeps sandboxes, their history, runs and images. Every state change
// goes through UpdateSandbox, which checks Version and appends the event in
// the same transaction, so no change is lost and none is applied twice.
type Store interface {
	// CreateSandbox inserts sb (Version 1) and its first event. It fails
	// with ErrConflict when a live sandbox of the same owner has the name.
	CreateSandbox(ctx context.Context, sb *Sandbox, ev Event) error
	// GetSandbox finds a sandbox by id, or by name among the live
	// sandboxes of owner "". ErrNotFound when there is none.
	GetSandbox(ctx context.Context, ref string) (*Sandbox, error)
	// SandboxesNamed returns the live sandboxes of every owner that have
	// the name.
	SandboxesNamed(ctx context.Context, name string) ([]*Sandbox, error)
	// ListSandboxes returns the sandboxes that are not destroyed, oldest
	// first; ListSandboxesOn those of them on node.
	ListSandboxes(ctx context.Context) ([]*Sandbox, error)
	ListSandboxesOn(ctx context.Context, node string) ([]*Sandbox, error)
	// UpdateSandbox writes sb if its Version is still the stored one, bumps
	// sb.Version and sb.UpdatedAt, and appends ev. ErrConflict when stale.
	UpdateSandbox(ctx context.Context, sb *Sandbox, ev Event) error
	// DeleteSandbox erases a sandbox's record, history and runs. It is only
	// for undoing a create that failed: destroyed sandboxes keep their record.
	DeleteSandbox(ctx context.Context, id string) error
	// Events returns a sandbox's history, oldest first.
	Events(ctx context.Context, sandboxID string) ([]Event, error)

	CreateRun(ctx context.Context, r *Run) error
	UpdateRun(ctx context.Context, r *Run) error
	GetRun(ctx context.Context, sandboxID, runID string) (*Run, error)
	// ListRuns returns a sandbox's runs, newest first, at most limit (0: all).
	ListRuns(ctx context.Context, sandboxID string, limit int) ([]*Run, error)
	// RunningRuns returns every run still marked running, in any sandbox.
	RunningRuns(ctx context.Context) ([]*Run, error)

	// CreateCheckpoint inserts c. ErrConflict when the sandbox already has
	// a checkpoint with c's name.
	CreateCheckpoint(ctx context.Context, c *Checkpoint) error
	// GetCheckpoint finds a checkpoint by id, or by name among sandboxID's
	// when sandboxID is set. ErrNotFound when there is none.
	GetCheckpoint(ctx context.Context, sandboxID, ref string) (*Checkpoint, error)
	// ListCheckpoints returns a sandbox's checkpoints oldest first, or every
	// checkpoint when sandboxID is "".
	ListCheckpoints(ctx context.Context, sandboxID string) ([]*Checkpoint, error)
	// ListCheckpointsOn returns the checkpoints of the sandboxes on node,
	// destroyed ones included, oldest first.
	ListCheckpointsOn(ctx context.Context, node string) ([]*Checkpoint, error)
	// UpdateCheckpoint rewrites c's manifest.
	UpdateCheckpoint(ctx context.Context, c *Checkpoint) error
	// SetCheckpointLocation records where a checkpoint's bytes are, and
	// nothing else of it. ErrNotFound when it is gone.
	SetCheckpointLocation(ctx context.Context, id, location string, b Blobs) error
	// DeleteCheckpoint removes a checkpoint; its children take its parent
	// as theirs, so the tree stays connected.
	DeleteCheckpoint(ctx context.Context, id string) error

	// PutImage records im as the newest version of its image: a record
	// of another version of the name is kept as an older version, one of
	// the same version replaced.
	PutImage(ctx context.Context, im *Image) error
	// GetImage returns the newest version of image name.
	GetImage(ctx context.Context, name string) (*Image, error)
	// ListImages returns the newest version of every image, by name.
	ListImages(ctx context.Context) ([]*Image, error)
	// DeleteImage removes every version of image name.
	DeleteImage(ctx context.Context, name string) error
	// GetImageVersion returns one version of image name, the newest or an
	// older one; ErrNotFound when it is not recorded.
	GetImageVersion(ctx context.Context, name string, version int) (*Image, error)
	// ListImageVersions returns the older versions of image name (every
	// image's when name is ""), by name then version.
	ListImageVersions(ctx context.Context, name string) ([]*Image, error)
	// DeleteImageVersion removes an older version's record; ErrNotFound
	// when there is none (the newest version is not an older one).
	DeleteImageVersion(ctx context.Context, name string, version int) error
	// SetImageLocation records where an image's root filesystem is, and
	// nothing else of it; ErrNotFound when it is gone.
	SetImageLocation(ctx context.Context, name, location string, b Blobs) error
}

// Volumes is the storage pool: root filesystems as copy-on-write volumes.
type Volumes interface {
	// Snapshot makes a new volume key from parent; read-only if asked.
	Snapshot(ctx context.Context, parent, key string, readonly bool) (path string, err error)
	// Remove deletes a volume; ErrNotFound when it does not exist.
	Remove(ctx context.Context, key string) error
	// Path is where the volume key lives on the host.
	Path(key string) string
	// Stat describes volume key; ErrNotFound when it does not exist.
	Stat(ctx context.Context, key string) (VolumeInfo, error)
	// Usage is how many bytes the files in volume key hold.
	Usage(ctx context.Context, key string) (int64, error)
	// SetLimit caps what volume key may hold (0 lifts the cap); writes
	// past it fail inside the sandbox. Unavailable where the pool cannot.
	SetLimit(ctx context.Context, key string, bytes int64) error
	// Quota is what volume key holds against its cap.
	Quota(ctx context.Context, key string) (DiskQuota, error)
}

// VolumeInfo describes one volume of the pool.
type VolumeInfo struct {
	Key      string
	Path     string // where the volume lives on the host
	ReadOnly bool
}

// Instance is what the engine needs to boot one incarnation.
type Instance struct {
	ID          string // <sandbox>-g<generation>
	Hostname    string
	Rootfs      string   // host path of the writable root filesystem
	Netns       string   // path of the network namespace
	Env         []string // den-init's environment
	CPUs        float64
	MemoryBytes int64
	// Init is the version of den-init to run ("": the one from before
	// versions were kept).
	Init string
	// Views are other sandboxes' files, mounted read-only (package
	// peers); their mount points are part of what a restore checks.
	Views []ViewMount
	// ViewsDir is the host directory mounted read-only at peers.Root,
	// where views come and go while the instance runs; "" for none.
	ViewsDir string
}

// ViewMount is a read-only view mounted into an instance.
type ViewMount = peers.Mount

// ViewBinder is a Runtime that mounts views inside a running instance,
// from where the instance sees them in its views directory
// (peers.Inside) onto their mount points, and takes them away.
type ViewBinder interface {
	BindViews(ctx context.Context, id string, views []ViewMount) error
	UnbindViews(ctx context.Context, id string, at ...string) error
}

// InstanceState is what the engine says about an instance.
type InstanceState string

// Instance states.
const (
	InstanceRunning InstanceState = "running"
	InstancePaused  InstanceState = "paused"
	InstanceStopped InstanceState = "stopped" // exists but its processes are gone
	InstanceMissing InstanceState = "missing" // the engine does not know it
)

// Runtime runs instances: one gVisor sandbox each. An instance is created
// by Start, lives on after dend exits, and is removed by Destroy.
type Runtime interface {
	Start(ctx context.Context, inst Instance) error
	State(ctx context.Context, id string) (InstanceState, error)
	// Destroy kills the instance and removes the engine's record of it.
	// Destroying a missing instance is not an error.
	Destroy(ctx context.Context, id string) error
	// List returns the ids of every instance the engine knows.
	List(ctx context.Context) ([]string, error)
	Version() string

	// Pause freezes an instance in RAM; Resume thaws it.
	Pause(ctx context.Context, id string) error
	Resume(ctx context.Context, id string) error
	// Checkpoint saves the instance's processes and memory into dir, a
	// new empty directory. With leaveRunning the instance stays as it was
	// (a paused one stays paused); without, it stops once saved and is
	// left for Destroy.
	Checkpoint(ctx context.Context, id, dir string, leaveRunning bool) error
	// Restore boots inst from the memory image in dir instead of from its
	// init. inst.Rootfs must be a fresh writable snapshot of the
	// filesystem saved with the image.
	Restore(ctx context.Context, inst Instance, dir string) error
	// Engine is what memory images made here are only valid for.
	Engine() EngineInfo
	// SpecHash hashes the parts of inst's engine spec a restore checks.
	SpecHash(inst Instance) string
	// HasInit reports whether memory images taken with that version of
	// den-init can be restored here.
	HasInit(version string) bool
	// Update changes an instance's CPU share and the host's backstops
	// for its memory and processes, in any state.
	Update(ctx context.Context, id string, l Limits) error
	// Stats is what the instance uses now.
	Stats(ctx context.Context, id string) (ResourceUsage, error)
	// ExitReason says why an instance's processes died, when the host
	// knows ("out of memory"), or "".
	ExitReason(ctx context.Context, id string) (string, error)
}

// Attachment is a sandbox's place on the host network.
type Attachment struct {
	Netns string     // path of the namespace
	Host  netip.Addr // host end of the link
	Guest netip.Addr // the sandbox's private address, where den-init listens
}

// Network gives each sandbox its own namespace and link to the host.
type Network interface {
	// Attach creates (or finds) the namespace and link for a sandbox in
	// slot, with the addresses configured, under policy p. Idempotent.
	Attach(ctx context.Context, sandboxID string, slot int, p netpolicy.Policy) (Attachment, error)
	// Enforce makes p what the sandbox in slot reaches, at once: its
	// firewall rules and the names its resolver answers. It is called
	// after every Attach and whenever the policy changes.
	Enforce(ctx context.Context, sandboxID string, slot int, p netpolicy.Policy) error
	// Detach removes the namespace, link, firewall rules and resolver
	// entries. Detaching what is not there is not an error.
	Detach(ctx context.Context, sandboxID string) error
	// Addr returns the addresses of slot without touching the host.
	Addr(slot int) (host, guest netip.Addr)
	// Slots is how many sandboxes the address range holds.
	Slots() int
}

// Guest is a connection to den-init inside one instance.
type Guest interface {
	Ping(ctx context.Context) (guest.Info, error)
	// Processes lists every process in the sandbox but den-init.
	Processes(ctx context.Context) ([]guest.Process, error)
	// Scrub removes the secret files and the memory den-init freed
	// (which may hold printed output), before memory is saved.
	Scrub(ctx context.Context) error
	Start(ctx context.Context, spec guest.ProcSpec) (guest.ProcStatus, error)
	// StartStream starts a process and streams its output in one request:
	// started gets its status before any output; an error from started
	// ends the stream, leaving the process running.
	StartStream(ctx context.Context, spec guest.ProcSpec, started func(guest.ProcStatus) error, fn func(kind byte, p []byte) error) (guest.ProcStatus, error)
	// Stream calls fn with output from the given offsets on, in order,
	// until the process ends and all of it was delivered; it then returns
	// the final status.
	Stream(ctx context.Context, id string, stdoutFrom, stderrFrom int64, fn func(kind byte, p []byte) error) (guest.ProcStatus, error)
	Status(ctx context.Context, id string) (guest.ProcStatus, error)
	Stdin(ctx context.Context, id string, r io.Reader, keepOpen bool) error
	Signal(ctx context.Context, id string, sig syscall.Signal) error
	Resize(ctx context.Context, id string, rows, cols uint16) error
	Ack(ctx context.Context, id string, stdout, stderr int64) error
	Release(ctx context.Context, id string) error
	Shutdown(ctx context.Context, grace time.Duration) error
	// Sync flushes the sandbox's file systems to the host.
	Sync(ctx context.Context) error
	// Rekey makes den-init accept only token from now on: a restored copy
	// of a sandbox must not share its parent's. With limits, den-init
	// applies them first, if it can, and Rekey says whether it did.
	Rekey(ctx context.Context, token string, limits *guest.Limits) (limitsSet bool, err error)
	// SetLimits makes den-init enforce memory and process limits inside.
	SetLimits(ctx context.Context, l guest.Limits) error
	Files
}

// Files is the file system inside a running sandbox, as den-init serves it.
// Paths are absolute paths inside the sandbox. Its calls are those a
// file transfer wraps (internal/transfer): through the Service's Files,
// each is a transfer.
type Files interface {
	transfer.Files
}

// GuestDialer returns a Guest for den-init at addr with token.
type GuestDialer func(addr netip.AddrPort, token string) Guest

// Secrets reveals secret values to the exec that needs them. A value never
// enters a Sandbox, Run or Event record.
type Secrets interface {
	// Reveal returns the named secret's value; ErrNotFound when there is
	// no such secret.
	Reveal(ctx context.Context, name string) ([]byte, error)
}

// Images finds base images, building a built-in one on first use.
type Images interface {
	// Ensure returns the newest version of image name.
	Ensure(ctx context.Context, name string) (*Image, error)
	// Version returns version of image name (0: the newest), whose root
	// filesystem is on this host; ErrNotFound names what is missing.
	Version(ctx context.Context, name string, version int) (*Image, error)
}

// BlobStats tells what a push sent.
type BlobStats struct {
	StreamBytes int64 // bytes in the stream
	SentBytes   int64 // compressed bytes of the chunks the blob store lacked
}

// BlobCollection tells what a collection of the blob store kept and
// removed.
type BlobCollection struct {
	Manifests        int   `json:"manifests"`
	ManifestsRemoved int   `json:"manifests_removed"`
	MissingManifests int   `json:"missing_manifests"`
	Chunks           int   `json:"chunks"`
	ChunksRemoved    int   `json:"chunks_removed"`
	BytesRemoved     int64 `json:"bytes_removed"`
}
