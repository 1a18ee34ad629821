// Package api holds den's wire types: the JSON bodies of the REST API under
// /v1, the frames of the exec stream, and the error envelope. It imports
// nothing internal, so the daemon, the Go SDK and third-party clients share
// one definition. The routes themselves are described in openapi.yaml.
package api

import "time"

// Version is the API prefix every route lives under.
const Version = "v1"

// Sandbox states as they appear on the wire.
const (
	StateCreating   = "creating"
	StateRunning    = "running"
	StatePaused     = "paused"
	StateHibernated = "hibernated"
	StateStopped    = "stopped"
	StateError      = "error"
	StateDestroyed  = "destroyed"
)

// CreateSandboxRequest is the body of POST /v1/sandboxes.
type CreateSandboxRequest struct {
	Name   string            `json:"name"`
	Image  string            `json:"image,omitempty"`  // default "debian"
	CPUs   float64           `json:"cpus,omitempty"`   // default 1
	Memory string            `json:"memory,omitempty"` // e.g. "512M", "2G"; default 1G
	PIDs   int               `json:"pids,omitempty"`   // processes and threads at once; default one per MiB of memory, 256 to 32768
	Disk   string            `json:"disk,omitempty"`   // cap on its files, e.g. "10G"; default none
	Env    map[string]string `json:"env,omitempty"`
	Labels map[string]string `json:"labels,omitempty"`
	// From starts the sandbox from a checkpoint instead of an image: a
	// checkpoint id, or SANDBOX:NAME for a sandbox's named checkpoint. Its
	// image, CPUs and memory come from the checkpoint, so leave those unset.
	From string `json:"from,omitempty"`
	// Ephemeral sandboxes keep nothing when they are destroyed, and are
	// destroyed when their TTL ends.
	Ephemeral bool    `json:"ephemeral,omitempty"`
	Policy    *Policy `json:"policy,omitempty"` // unset fields take dend's defaults
	// Network is what it may reach; absent means mode none, or, with From,
	// the checkpoint's policy.
	Network *NetworkPolicy `json:"network,omitempty"`
	// Secrets are granted to its commands (admins only). A sandbox made
	// from a checkpoint gets only these, never its origin's.
	Secrets []SecretGrant `json:"secrets,omitempty"`
	// Node, in a fleet, is the node it goes to; absent, the one whose
	// sandboxes commit the least of its memory.
	Node string `json:"node,omitempty"`
	// Setup are shell commands run in order once it boots, and again by
	// every rebase; a failing one fails the create.
	Setup []string `json:"setup,omitempty"`
	// Keep are paths a rebase carries over to the new root, besides
	// /root, /home, /work and /srv.
	Keep []string `json:"keep,omitempty"`
}

// Sandbox is the durable record of one sandbox.
type Sandbox struct {
	ID   string `json:"id"`
	Name string `json:"name"` // unique among its owner's sandboxes
	// Owner is the owner identity of the token that created it (a token
	// id); empty for sandboxes admins created. Names are unique per owner.
	Owner string `json:"owner,omitempty"`
	Image string `json:"image"`
	// ImageVersion is the version of Image its root filesystem came from;
	// ImageOutdated says a newer version exists (`den rebase` moves it).
	ImageVersion  int  `json:"image_version"`
	ImageOutdated bool `json:"image_outdated,omitempty"`
	// Setup are its setup steps; Keep the paths a rebase carries over,
	// the defaults included.
	Setup       []string          `json:"setup,omitempty"`
	Keep        []string          `json:"keep,omitempty"`
	Harness     *Harness          `json:"harness,omitempty"` // its agent program, apart from its environment
	CPUs        float64           `json:"cpus"`
	MemoryBytes int64             `json:"memory_bytes"`
	PIDs        int               `json:"pids,omitempty"`       // process limit; 0: none
	DiskBytes   int64             `json:"disk_bytes,omitempty"` // disk cap; 0: none
	Usage       *Usage            `json:"usage,omitempty"`      // now, against the limits (GET of one sandbox)
	Env         map[string]string `json:"env,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	State       string            `json:"state"`
	Reason      string            `json:"reason,omitempty"` // why it is in error, or why it stopped
	Generation  int64             `json:"generation"`
	Node        string            `json:"node,omitempty"`    // the node of the fleet it is on
	Address     string            `json:"address,omitempty"` // private in-sandbox address
	Ephemeral   bool              `json:"ephemeral,omitempty"`
	Network     NetworkPolicy     `json:"network"`           // what it may reach
	Secrets     []SecretGrant     `json:"secrets,omitempty"` // granted to its commands: names, never values
	Ports       []ExposedPort     `json:"ports,omitempty"`   // served through dend, by port number
	// Policy is the idle policy in effect: the sandbox's own values with
	// dend's defaults filled in, every field set.
	Policy Policy      `json:"policy"`
	Next   *NextAction `json:"next,omitempty"` // what the idle policy does next, if anything
	// RunningFor is how long it has run in total, the time its TTL counts
	// (paused and hibernated time is not counted), e.g. "1h2m3s".
	RunningFor string `json:"running_for"`
	// Checkpoint is, while hibernated, the checkpoint holding its state; in
	// error after a failed restore, the checkpoint it came from.
	Checkpoint string    `json:"checkpoint,omitempty"`
	Origin     string    `json:"origin,omitempty"`  // the checkpoint it was created or forked from
	Head       string    `json:"head,omitempty"`    // its newest checkpoint: the parent of its next one
	Pending    string    `json:"pending,omitempty"` // a change of several steps under way, e.g. "hibernate"
	CreatedAt  time.Time `json:"created_at"`
	UpdatedAt  time.Time `json:"updated_at"`
}

// SandboxList is the body of GET /v1/sandboxes.
type SandboxList struct {
	Sandboxes []Sandbox `json:"sandboxes"`
}

// Event is one entry of a sandbox's history.
type Event struct {
	Seq        int64     `json:"seq"`
	Time       time.Time `json:"time"`
	Type       string    `json:"type"` // created, started, stopped, lost, error, destroyed, ...
	From       string    `json:"from,omitempty"`
	To         string    `json:"to,omitempty"`
	Generation int64     `json:"generation"`
	Message    string    `json:"message,omitempty"`
}

// StreamEvent is one event of GET /v1/events, the data of one
// Server-Sent Event whose id is ID.
type StreamEvent struct {
	// ID resumes the stream after this event: BOOT.SEQ from a dend on its
	// own, NODE=BOOT.SEQ pairs in a fleet; none on a gap event. Opaque.
	ID   string    `json:"id,omitempty"`
	Time time.Time `json:"time"`
	Type string    `json:"type"` // a history event type, run.started, run.ended, limit.hit, policy.action or gap
	// Node is the node it happened on, in a fleet (a gap: whose events
	// may be missing).
	Node       string `json:"node,omitempty"`
	SandboxID  string `json:"sandbox_id,omitempty"`
	Sandbox    string `json:"sandbox,omitempty"` // its name
	Owner      string `json:"owner,omitempty"`
	From       string `json:"from,omitempty"`
	To         string `json:"to,omitempty"`
	Generation int64  `json:"generation,omitempty"`
	Message    string `json:"message,omitempty"`
	RunID      string `json:"run_id,omitempty"`
	RunStatus  string `json:"run_status,omitempty"`
	ExitCode   *int   `json:"exit_code,omitempty"`
	LimitHit   string `json:"limit_hit,omitempty"`
}

// MetricsList is the body of GET /v1/sandboxes/{name}/metrics: samples
// dend took of the sandbox while it ran, every few seconds, oldest first.
type MetricsList struct {
	Samples []MetricSample `json:"samples"`
}

// MetricSample is what a running sandbox used at one moment.
type MetricSample struct {
	At time.Time `json:"at"`
	// CPUPercent is its CPU use since the sample before, as a share of
	// the CPUs it may use (100: all of them, all the time).
	CPUPercent  float64 `json:"cpu_percent"`
	CPUs        float64 `json:"cpus"`
	MemoryBytes int64   `json:"memory_bytes"` // charged to it on the host, the engine's own included
	MemoryLimit int64   `json:"memory_limit"`
	DiskBytes   int64   `json:"disk_bytes"`
	DiskLimit   int64   `json:"disk_limit"`
}

// EventList is the body of GET /v1/sandboxes/{name}/events.
type EventList struct {
	Events []Event `json:"events"`
}

// ExecRequest starts a command in a sandbox. It is the body of
// POST /v1/sandboxes/{name}/exec (detached runs) and the first message of
// the exec WebSocket (attached runs).
type ExecRequest struct {
	Argv    []string          `json:"argv"`
	Env     map[string]string `json:"env,omitempty"`
	Cwd     string            `json:"cwd,omitempty"`  // default: the image's working dir, else /; "~" is the user's home
	User    string            `json:"user,omitempty"` // name, uid or uid:gid; default root
	Stdin   bool              `json:"stdin,omitempty"`
	TTY     bool              `json:"tty,omitempty"`
	Rows    uint16            `json:"rows,omitempty"`
	Cols    uint16            `json:"cols,omitempty"`
	Timeout Duration          `json:"timeout,omitempty"` // 0: none; the whole process tree is killed when it passes
	Detach  bool              `json:"detach,omitempty"`
	// Labels tag the run (at most 64; keys of 1-63 bytes, values of at
	// most 255), e.g. E2B's process tag as "tag".
	Labels map[string]string `json:"labels,omitempty"`
	// OutputMax is the most of each output stream dend keeps, e.g. "1M":
	// the head and the tail, the middle dropped. Default and most: dend's
	// --run-output-max.
	OutputMax string `json:"output_max,omitempty"`
}

// Run statuses.
const (
	RunRunning  = "running"
	RunExited   = "exited"    // ended on its own; ExitCode says how
	RunKilled   = "killed"    // ended by a signal
	RunTimedOut = "timed_out" // killed because its timeout passed
	RunLost     = "lost"      // its sandbox stopped or vanished before it ended
)

// Run is the record of one command.
type Run struct {
	ID         string `json:"id"`
	Sandbox    string `json:"sandbox"`
	Generation int64  `json:"generation"`
	// PID is the process's id inside the sandbox; it stays the same
	// across pause, hibernation and restore. 0 when unknown.
	PID        int               `json:"pid,omitempty"`
	Argv       []string          `json:"argv"`
	Cwd        string            `json:"cwd,omitempty"`
	EnvNames   []string          `json:"env_names,omitempty"`
	Labels     map[string]string `json:"labels,omitempty"`
	User       string            `json:"user,omitempty"`
	TTY        bool              `json:"tty,omitempty"`
	Detached   bool              `json:"detached,omitempty"`
	Status     string            `json:"status"`
	ExitCode   *int              `json:"exit_code,omitempty"`
	Signal     string            `json:"signal,omitempty"`
	LimitHit   string            `json:"limit_hit,omitempty"` // memory (killed: out of memory) or pids
	StartedAt  time.Time         `json:"started_at"`
	EndedAt    *time.Time        `json:"ended_at,omitempty"`
	StdoutSize int64             `json:"stdout_bytes"`
	StderrSize int64             `json:"stderr_bytes"`
	// StdoutDropped and StderrDropped are how many of those bytes dend
	// did not keep; logs show a marker line in their place. Offsets count
	// them: stdout_bytes is always the offset the stream reached.
	StdoutDropped int64 `json:"stdout_dropped"`
	StderrDropped int64 `json:"stderr_dropped"`
	// OutputMax is the most of each stream kept for this run.
	OutputMax int64 `json:"output_max,omitempty"`
	// OutputCut says why output was last dropped, "" if none was.
	OutputCut string `json:"output_cut,omitempty"`
}

// Why a run's output was dropped (Run.OutputCut).
const (
	OutputCutCap       = "cap"       // the middle of a stream longer than its cap
	OutputCutReserve   = "reserve"   // dend's disk was down to its free-space reserve
	OutputCutAllowance = "allowance" // the sandbox's run output allowance was full of running runs
	OutputCutPruned    = "pruned"    // removed to make room for the sandbox's newer runs
)

// RunList is the body of GET /v1/sandboxes/{name}/runs.
type RunList struct {
	Runs []Run `json:"runs"`
}

// SignalRequest is the body of POST /v1/sandboxes/{name}/runs/{run}/signal.
type SignalRequest struct {
	Signal string `json:"signal"` // e.g. "TERM", "KILL", "INT" or a number
}

// FileInfo describes one file inside a sandbox.
type FileInfo struct {
	Name    string    `json:"name"`
	Path    string    `json:"path"`
	Size    int64     `json:"size"`
	Mode    uint32    `json:"mode"` // permission bits
	Type    string    `json:"type"` // file, dir, symlink, other
	ModTime time.Time `json:"mod_time"`
	Target  string    `json:"target,omitempty"` // symlink target
	// UID and GID own the file; Owner and Group are their names inside
	// the sandbox, "" when they have none.
	UID   uint32 `json:"uid"`
	GID   uint32 `json:"gid"`
	Owner string `json:"owner,omitempty"`
	Group string `json:"group,omitempty"`
	// Xattrs are a file's or directory's user extended attributes
	// (user.*), by full name; absent when it has none.
	Xattrs map[string]string `json:"xattrs,omitempty"`
}

// FileList is the body of GET /v1/sandboxes/{name}/files/list.
type FileList struct {
	Files []FileInfo `json:"files"`
}

// WatchEvent is one line of GET /v1/sandboxes/{name}/files/watch: a
// change to Name, a path relative to the watched directory ("" for the
// directory itself). The last line of a watch that stopped holds only
// Error.
type WatchEvent struct {
	Name  string `json:"name,omitempty"`
	Op    string `json:"op,omitempty"` // create, write, remove, rename, chmod, overflow
	Error *Error `json:"error,omitempty"`
}

// MkdirRequest is the body of POST /v1/sandboxes/{name}/files/mkdir.
type MkdirRequest struct {
	Path    string `json:"path"`
	Parents bool   `json:"parents,omitempty"`
	Mode    uint32 `json:"mode,omitempty"` // default 0755
	// User owns the directories made: a name, uid, or either with
	// :group; default root.
	User string `json:"user,omitempty"`
	// ParentsByRoot, with Parents and a call made as a user (?as=), has
	// the missing directories made by root and given to that user, as
	// E2B's envd does; the user must still reach the existing ones.
	ParentsByRoot bool `json:"parents_by_root,omitempty"`
}

// MoveRequest is the body of POST /v1/sandboxes/{name}/files/move.
type MoveRequest struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// Image is a base root filesystem sandboxes are created from.
type Image struct {
	Name string `json:"name"`
	// Version grows with every build, import or pull of the name: 1, 2...
	Version   int       `json:"version"`
	Source    string    `json:"source"` // builtin, imported, pulled
	Ref       string    `json:"ref,omitempty"`
	Digest    string    `json:"digest,omitempty"`
	SizeBytes int64     `json:"size_bytes"`
	Env       []string  `json:"env,omitempty"`
	Cwd       string    `json:"cwd,omitempty"`
	User      string    `json:"user,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	// Warm is this node's warm pool of the image; absent when it has none.
	Warm *WarmPool `json:"warm,omitempty"`
	// Older are the older versions kept, because sandboxes or checkpoints
	// were made from them, oldest first.
	Older []Image `json:"older,omitempty"`
}

// SetupRequest is the body of PUT /v1/sandboxes/{name}/setup: the setup
// steps and kept paths a rebase uses. An absent list stays as it is, an
// empty one is cleared.
type SetupRequest struct {
	Steps *[]string `json:"steps,omitempty"`
	Keep  *[]string `json:"keep,omitempty"`
}

// RebaseRequest is the body of POST /v1/sandboxes/{name}/rebase.
type RebaseRequest struct {
	// Image is IMAGE or IMAGE@VERSION; absent, the sandbox's own image.
	// No version means the newest.
	Image string `json:"image,omitempty"`
}

// Rebase is what a rebase did.
type Rebase struct {
	Sandbox Sandbox `json:"sandbox"`
	// Checkpoint is the files-only checkpoint taken first: `den restore
	// NAME CHECKPOINT` undoes the rebase.
	Checkpoint string      `json:"checkpoint"`
	From       string      `json:"from"` // IMAGE@VERSION before
	To         string      `json:"to"`   // IMAGE@VERSION after
	Kept       []string    `json:"kept,omitempty"`
	Steps      []SetupStep `json:"steps,omitempty"`
	DurationMS int64       `json:"duration_ms"`
}

// Headers and the media type of an agent's archive (`den export`,
// `den import`). The key is 64 hex digits: an export given none makes a
// fresh one and answers it in HeaderArchiveKey; an import needs it.
const (
	HeaderArchiveKey     = "Den-Archive-Key"
	HeaderArchiveMemory  = "Den-Archive-Memory"  // "true" when it holds the processes
	HeaderArchiveSecrets = "Den-Archive-Secrets" // the secrets it needs, by name, comma-separated
	ArchiveContentType   = "application/vnd.den.agent"
)

// Import is what an import of an agent's archive made.
type Import struct {
	Sandbox Sandbox `json:"sandbox"`
	// From is the name the agent had where it was exported.
	From string `json:"from"`
	// Memory says it came with its processes: it is hibernated and
	// wakes on first use; else it is stopped and boots on start.
	Memory bool `json:"memory"`
	// Secrets are the secrets it is granted, by name: set on this den.
	Secrets     []string `json:"secrets,omitempty"`
	Image       string   `json:"image"`
	ImageDigest string   `json:"image_digest,omitempty"`
	// ImageNote says this den lacks its image: its files are whole, but
	// a rebase needs the image.
	ImageNote  string    `json:"image_note,omitempty"`
	ExportedAt time.Time `json:"exported_at"`
}

// SetupStep is a setup step that ran.
type SetupStep struct {
	Step       int    `json:"step"`              // from 1
	Harness    bool   `json:"harness,omitempty"` // a harness's step, numbered apart from the setup steps
	Command    string `json:"command"`
	Run        string `json:"run"` // its run id: `den logs NAME RUN`
	ExitCode   int    `json:"exit_code"`
	DurationMS int64  `json:"duration_ms"`
}

// WarmPool is how many instances of an image a node keeps booted ahead of
// demand, and what they cost. A create of a sandbox of MemoryBytes from
// the image claims one instead of booting (GET /v1/images shows each
// image's; PUT /v1/images/{image}/warm sets it).
type WarmPool struct {
	Target      int   `json:"target"`       // instances kept ready
	MemoryBytes int64 `json:"memory_bytes"` // memory limit of the sandboxes it serves
	Ready       int   `json:"ready"`
	Booting     int   `json:"booting"`
	// HostMemoryBytes is the host memory its ready instances hold (their
	// proportional set size).
	HostMemoryBytes int64 `json:"host_memory_bytes"`
	// Held says why the pool is below its target and not refilling.
	Held string `json:"held,omitempty"`
}

// SetWarmRequest is the body of PUT /v1/images/{image}/warm. Count 0
// empties the pool; MemoryBytes 0 serves sandboxes of the default size.
type SetWarmRequest struct {
	Count       int   `json:"count"`
	MemoryBytes int64 `json:"memory_bytes,omitempty"`
}

// ImageList is the body of GET /v1/images.
type ImageList struct {
	Images []Image `json:"images"`
}

// BuildImageRequest is the body of POST /v1/images/build. Name is one of
// the built-in recipes: "debian", "busybox" or "e2b-base".
type BuildImageRequest struct {
	Name  string `json:"name"`
	Force bool   `json:"force,omitempty"` // rebuild even if present
}

// PullImageRequest is the body of POST /v1/images/pull.
type PullImageRequest struct {
	Ref      string `json:"ref"`
	Name     string `json:"name,omitempty"`     // default: derived from ref
	Insecure bool   `json:"insecure,omitempty"` // plain HTTP registry
}

// Progress is one line of the NDJSON stream that long image operations
// return. The last line has Done set, and either Image or Error.
type Progress struct {
	Phase   string `json:"phase"`             // e.g. "download", "extract", "bootstrap"
	Message string `json:"message,omitempty"` // human text
	Current int64  `json:"current,omitempty"` // bytes or steps done
	Total   int64  `json:"total,omitempty"`   // 0 when unknown
	Done    bool   `json:"done,omitempty"`
	Image   *Image `json:"image,omitempty"`
	Error   *Error `json:"error,omitempty"`
}

// VersionHeader names, on every answer of dend, the release of den it
// runs (what `dend --version` prints): a client built from another
// release can say so, and which of its calls that dend may not know.
// dends of v0.1.0 do not send it; GET /v1/health names theirs.
const VersionHeader = "Den-Version"

// Health is the body of GET /v1/health.
type Health struct {
	Status       string `json:"status"` // "ok"
	Version      string `json:"version"`
	RunscVersion string `json:"runsc_version"`
	Storage      string `json:"storage"` // btrfs or copy
	// Disk is the free space on dend's data disk against its reserve.
	Disk *DiskHealth `json:"disk,omitempty"`
	// Pool is how full the storage pool is; absent when it cannot be read.
	Pool *PoolHealth `json:"pool,omitempty"`
	// Warm is what this node's warm pools hold, beside the host's
	// memory; absent when it keeps none.
	Warm *WarmHealth `json:"warm,omitempty"`
	// Blobs says whether dend reaches its blob store; absent without one.
	Blobs *BlobsHealth `json:"blobs,omitempty"`
}

// BlobsHealth says whether dend reaches its blob store. While it does
// not, uploads wait and retry, and verbs that need the store (moves,
// downloads, recover --rollback) answer 503.
type BlobsHealth struct {
	Reachable bool       `json:"reachable"`
	Error     string     `json:"error,omitempty"` // why it does not answer
	Since     *time.Time `json:"since,omitempty"` // when it stopped answering
}

// WarmHealth is what a node's warm pools hold on its host.
type WarmHealth struct {
	Instances            int   `json:"instances"` // ready to be claimed
	Booting              int   `json:"booting"`
	HostMemoryBytes      int64 `json:"host_memory_bytes"` // their proportional set size together
	MemoryTotalBytes     int64 `json:"memory_total_bytes"`
	MemoryAvailableBytes int64 `json:"memory_available_bytes"`
	// ReserveBytes is the host memory pools leave available; under it
	// (Pressure) they give instances back and do not refill.
	ReserveBytes int64 `json:"reserve_bytes"`
	Pressure     bool  `json:"pressure"`
}

// DiskHealth is the free space dend keeps on its data disk. Once it is
// down to the reserve (Low), dend drops run output and refuses new
// sandboxes and commands until space is freed.
type DiskHealth struct {
	FreeBytes    int64 `json:"free_bytes"` // -1 when unknown
	ReserveBytes int64 `json:"reserve_bytes"`
	Low          bool  `json:"low"`
}

// PoolHealth is how full the storage pool is and how sandboxes share it.
type PoolHealth struct {
	SizeBytes    int64 `json:"size_bytes"`
	UsedBytes    int64 `json:"used_bytes"`
	FreeBytes    int64 `json:"free_bytes"`    // still available for writing
	ReserveBytes int64 `json:"reserve_bytes"` // kept for den's checkpoints and hibernation
	// Full: free space is below the reserve; new sandboxes and forks are
	// refused until some is freed.
	Full bool `json:"full"`
	// DiskCaps says whether the pool enforces sandboxes' disk caps (the
	// copy driver cannot).
	DiskCaps         bool    `json:"disk_caps"`
	DefaultDiskBytes int64   `json:"default_disk_bytes,omitempty"` // cap of a sandbox that asks for none
	PromisedBytes    int64   `json:"promised_bytes"`               // sandboxes' caps added up
	Overcommit       float64 `json:"overcommit,omitempty"`         // caps together may reach size × this
}
