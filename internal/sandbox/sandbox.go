// Package sandbox is den's domain: what a sandbox is, the states it moves
// through, the records kept about it, and the Service that carries out every
// verb. It declares the ports it needs from the outside world (Store,
// Volumes, Runtime, Network, Guest, Images) as small interfaces; adapters in
// other packages implement them, and this package imports none of them.
package sandbox

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/expose"
	"github.com/den-dev/den/internal/grant"
	"github.com/den-dev/den/internal/idle"
	"github.com/den-dev/den/internal/netpolicy"
	"github.com/den-dev/den/internal/peers"
	"github.com/den-dev/den/internal/specs"
)

// Spec is what the user asked for. Its network policy and limits can be
// changed on a live sandbox; its idle policy is kept apart.
type Spec struct {
	Image string `json:"image"`
	// ImageVersion is the version of Image its root filesystem came from
	// (0 for sandboxes from before images had versions: version 1).
	ImageVersion int              `json:"image_version,omitempty"`
	CPUs         float64          `json:"cpus"`
	MemoryBytes  int64            `json:"memory_bytes"`
	PIDs         int              `json:"pids,omitempty"`       // most processes and threads at once; 0: dend's default
	DiskBytes    int64            `json:"disk_bytes,omitempty"` // most bytes its files may hold; 0: dend's default
	Network      netpolicy.Policy `json:"network,omitzero"`     // zero value: mode none
	Secrets      []grant.Grant    `json:"secrets,omitempty"`    // what its commands get at exec time
	// SecretsGranted is set once any secret was granted, and stays set
	// (also in forks and sandboxes made from its checkpoints): its memory
	// images are sealed. See grant.Sealer.
	SecretsGranted bool          `json:"secrets_granted,omitempty"`
	Ports          []expose.Port `json:"ports,omitempty"` // served through dend, by port number
	// Peers are its read-only views of other sandboxes' files (package
	// peers).
	Peers []peers.Peer `json:"peers,omitempty"`
	// LiveViews says its instances boot with their views directory at
	// peers.Root, so views there change while it runs. Set for
	// sandboxes created since; older ones keep the mounts their memory
	// images were taken with.
	LiveViews bool `json:"live_views,omitempty"`
	// BoundViews says its views placed elsewhere than under peers.Root
	// are in its views directory too, bound onto their mount points by
	// den-init, so they also change while it runs. Set for sandboxes
	// created since; older ones have those mounted by the engine at boot.
	BoundViews bool              `json:"bound_views,omitempty"`
	Env        map[string]string `json:"env,omitempty"`
	Labels     map[string]string `json:"labels,omitempty"`
	// Ephemeral sandboxes keep nothing when they are destroyed: no
	// checkpoints, no run output, no record.
	Ephemeral bool `json:"ephemeral,omitempty"`
	// Base is the image's configuration at create time, so a sandbox keeps
	// working the same if its image is later removed or rebuilt.
	Base *ImageConfig `json:"base,omitempty"`
	// Setup are the shell commands that make the sandbox what it is on top
	// of its image; a rebase runs them again on the new image, in order.
	Setup []string `json:"setup,omitempty"`
	// Keep are the paths a rebase carries over to the new root besides
	// DefaultKeep.
	Keep []string `json:"keep,omitempty"`
	// Services are the long-lived processes den-init keeps running, in
	// the order they were added (services.go).
	Services []ServiceSpec `json:"services,omitempty"`
	// Harness is the agent program, apart from its environment
	// (harness.go); nil: none.
	Harness *Harness `json:"harness,omitempty"`
}

// ImageConfig is the part of an image's configuration commands inherit.
type ImageConfig struct {
	Env  []string `json:"env,omitempty"`
	Cwd  string   `json:"cwd,omitempty"`
	User string   `json:"user,omitempty"`
}

// Sandbox is the durable record of one sandbox. Identity (ID, Name) is kept
// apart from incarnation (Generation, Token): every boot is a new instance
// with a higher generation.
type Sandbox struct {
	ID         string
	Name       string
	Spec       Spec
	State      State
	Reason     string      // why it is in error, or why it stopped on its own
	Generation int64       // grows with every new instance; 0 before the first boot
	Version    int64       // optimistic-concurrency counter, bumped by every update
	Node       string      // host that owns it
	Owner      string      // id of the API token that created it; "" for admin callers
	Slot       int         // network slot: which private address pair it uses
	Token      string      // den-init token of the current instance
	Policy     idle.Policy // idle policy and retention; unset fields take the daemon's defaults
	Usage      idle.Usage  // running time, for the TTL
	// Checkpoint is, while hibernated, the checkpoint holding its state;
	// in error after a failed restore, the checkpoint it came from.
	Checkpoint string
	Origin     string // the checkpoint it was created or forked from, or ""
	Head       string // its newest checkpoint: the parent of its next one
	// Pending names a change of several steps under way (PendingHibernate,
	// ...), so a dend that restarts in its middle finishes or undoes it.
	Pending string
	// Init is the version of den-init its current instance runs ("" for
	// instances from before versions were kept): a memory image needs the
	// very binary it was taken with to come back.
	Init      string
	CreatedAt time.Time
	UpdatedAt time.Time
	// ImageLatest is the newest version of its image (0 when unknown):
	// filled by the Service, not stored. See Outdated.
	ImageLatest int
}

// Outdated reports whether a newer version of the sandbox's image exists.
func (sb *Sandbox) Outdated() bool {
	return sb.ImageLatest > sb.Spec.ImageVersionOrFirst()
}

// ImageVersionOrFirst is the image version the spec records, 1 for specs
// from before versions were kept.
func (s *Spec) ImageVersionOrFirst() int { return max(s.ImageVersion, 1) }

// InstanceID is the engine's name for the sandbox's current incarnation.
func (sb *Sandbox) InstanceID() string {
	return fmt.Sprintf("%s-g%d", sb.ID, sb.Generation)
}

// VolumeKey is the storage key of the sandbox's root filesystem.
func (sb *Sandbox) VolumeKey() string { return "sandboxes/" + sb.ID }

// Event is one line of a sandbox's history.
type Event struct {
	SandboxID  string
	Seq        int64 // set by the store
	Time       time.Time
	Type       string
	From, To   State
	Generation int64
	Message    string
}

// Event types.
const (
	EventCreated    = "created"
	EventStarted    = "started"
	EventStopped    = "stopped"
	EventLost       = "lost"     // the instance vanished without den stopping it
	EventAttached   = "attached" // dend restarted and found the instance alive
	EventFailed     = "failed"
	EventDestroyed  = "destroyed"
	EventPaused     = "paused"
	EventResumed    = "resumed"
	EventHibernated = "hibernated"
	EventCheckpoint = "checkpoint"
	EventRestored   = "restored"
	EventForked     = "forked"
	EventPolicy     = "policy"
	EventExpired    = "expired"  // its TTL ended
	EventNetwork    = "network"  // its network policy changed
	EventSecrets    = "secrets"  // the secrets granted to it changed
	EventLimits     = "limits"   // its resource limits changed
	EventPorts      = "ports"    // a port was exposed, unexposed or made public or private
	EventDeferred   = "deferred" // an idle step was put off, saying why
	EventPeers      = "peers"    // a view of another sandbox was added, refreshed or removed
	EventSetup      = "setup"    // its setup steps or kept paths changed
	EventRebased    = "rebased"  // it was given a new root from an image version
	EventServices   = "services" // a service was added or removed, or its services did not start
)

// Pending changes: the steps of a multi-step verb a restarted dend must
// finish or undo.
const (
	PendingHibernate  = "hibernate"
	PendingResume     = "resume"
	PendingCheckpoint = "checkpoint"
	PendingRestore    = "restore"
	PendingStop       = "stop"
	PendingDestroy    = "destroy"
	PendingRebase     = "rebase"
	PendingHarness    = "harness"
)

// RunStatus is where a run is.
type RunStatus string

// Run statuses, as on the wire.
const (
	RunRunning  RunStatus = "running"
	RunExited   RunStatus = "exited"
	RunKilled   RunStatus = "killed"
	RunTimedOut RunStatus = "timed_out"
	RunLost     RunStatus = "lost"
)

// Run is the record of one command. Secret values are never kept: only the
// names of the environment variables it was given.
type Run struct {
	ID         string
	SandboxID  string
	Generation int64
	GuestID    string // den-init's id for the process
	// PID is the process's id inside the sandbox (0 when unknown): it
	// stays the same across pause, hibernation and restore, which bring
	// the same processes back.
	PID      int
	Argv     []string
	Cwd      string
	EnvNames []string
	// Labels are what the caller tagged the run with (E2B's process
	// tag is the label "tag"); nil when none.
	Labels     map[string]string
	User       string
	TTY        bool
	Detached   bool
	Status     RunStatus
	ExitCode   *int
	Signal     string
	StartedAt  time.Time
	EndedAt    *time.Time
	StdoutSize int64
	StderrSize int64
	// LimitHit is the limit its process ran into (guest.LimitMemory,
	// guest.LimitPIDs), or "".
	LimitHit string
	// StdoutDropped and StderrDropped are how many bytes of each stream
	// are not kept on the host (see internal/runoutput); the sizes above count
	// them, so offsets stay positions in what the process wrote.
	StdoutDropped int64
	StderrDropped int64
	// OutputMax is the bytes kept per stream the run was collected with.
	OutputMax int64
	// OutputCut says why output was last dropped: one of the OutputCut*
	// values, or "" when all of it is kept.
	OutputCut string
}

// Image is one version of a base root filesystem. Building, importing or
// pulling a name that exists makes a new version; older ones stay while a
// sandbox or a checkpoint was made from them.
type Image struct {
	Name      string
	Version   int    // 1, 2, ...: grows with every build, import or pull of Name
	Source    string // builtin, imported, pulled
	Ref       string
	Digest    string
	SizeBytes int64
	Env       []string // KEY=VALUE from the image config
	Cwd       string
	User      string
	CreatedAt time.Time
	// Location and Blobs say whether its root filesystem is in the blob
	// store too, as a checkpoint's do (see fleet.go). A rebuilt image
	// starts local again.
	Location string
	Blobs    Blobs
}

// VolumeKey is the storage key of the image's read-only root filesystem:
// images/NAME for version 1 (as before versions were kept), else
// images/NAME@VERSION.
func (im *Image) VolumeKey() string { return ImageVolumeKey(im.Name, im.Version) }

// ImageVolumeKey is the storage key of version of image name.
func ImageVolumeKey(name string, version int) string {
	if version <= 1 {
		return "images/" + name
	}
	return fmt.Sprintf("images/%s@%d", name, version)
}

// ParseImageVolumeKey is the image name and version whose root filesystem
// is at key, or ok false when key is no image's.
func ParseImageVolumeKey(key string) (name string, version int, ok bool) {
	rest, ok := strings.CutPrefix(key, "images/")
	if !ok {
		return "", 0, false
	}
	name, v, versioned := strings.Cut(rest, "@")
	if !versioned {
		return name, 1, true
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 2 {
		return "", 0, false
	}
	return name, n, true
}

// ParseImageRef splits an image reference NAME or NAME@VERSION; version
// is 0 when none is named (the newest). Errors are errdefs.Invalid.
func ParseImageRef(ref string) (name string, version int, err error) {
	name, v, versioned := strings.Cut(ref, "@")
	if err := specs.ValidateName("image", name); err != nil {
		return "", 0, err
	}
	if !versioned {
		return name, 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || strconv.Itoa(n) != v {
		return "", 0, errdefs.WithHint(errdefs.Invalid("invalid image version %q in %q", v, ref),
			"name a version as IMAGE@N with N a whole number from 1; `den image ls` lists the versions")
	}
	return name, n, nil
}

// Limits on a spec.
const (
	MinMemory = 64 << 20
	MaxCPUs   = 64
)

// Validate checks a spec after defaults have been applied.
func (s *Spec) Validate() error {
	if err := specs.ValidateName("image", s.Image); err != nil {
		return err
	}
	if err := s.Limits().Validate(); err != nil {
		return err
	}
	if err := specs.ValidateEnv(s.Env); err != nil {
		return err
	}
	return specs.ValidateLabels(s.Labels)
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
