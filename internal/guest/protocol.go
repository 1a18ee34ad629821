// Package guest is the host side of the den-init protocol: the wire types
// and the Client that dend uses to start processes, read their output by
// byte offset, and work with files inside a sandbox. PROTOCOL.md beside
// this file describes the protocol; cmd/den-init serves it (see
// internal/initd).
package guest

import "time"

// InitPath is where den-init's binary appears inside every sandbox.
const InitPath = "/.den/den-init"

// Port is the TCP port den-init listens on, on the sandbox's private address.
const Port = 49900

// Environment variables dend passes to den-init.
const (
	EnvToken = "DEN_INIT_TOKEN" // bearer token for this instance; removed from children's environment
	EnvAddr  = "DEN_INIT_ADDR"  // listen address, default ":49900"
)

// ProcSpec is the body of POST /v1/procs.
type ProcSpec struct {
	Argv    []string      `json:"argv"`
	Env     []string      `json:"env,omitempty"`  // KEY=VALUE, the whole environment
	Cwd     string        `json:"cwd,omitempty"`  // default /; HomeDir for the user's home
	User    string        `json:"user,omitempty"` // name, uid, or uid:gid; default root
	TTY     bool          `json:"tty,omitempty"`
	Rows    uint16        `json:"rows,omitempty"`
	Cols    uint16        `json:"cols,omitempty"`
	Stdin   bool          `json:"stdin,omitempty"`   // keep a stdin pipe open; else stdin is /dev/null
	Timeout time.Duration `json:"timeout,omitempty"` // kill the whole process tree after this long; 0 = never
	// Secrets go to the process only, never into JSON: a spec with some
	// is sent as ContentTypeSecrets.
	Secrets []Secret `json:"-"`
}

// HomeDir as a ProcSpec's Cwd is the home directory of its user, from
// the sandbox's passwd.
const HomeDir = "~"

// ProcStatus describes one process den-init started.
type ProcStatus struct {
	ID         string     `json:"id"`
	PID        int        `json:"pid"`
	Argv       []string   `json:"argv"`
	Running    bool       `json:"running"`
	ExitCode   int        `json:"exit_code"`        // valid when !Running; -1 when killed by a signal
	Signal     string     `json:"signal,omitempty"` // e.g. "KILL" when killed by a signal
	TimedOut   bool       `json:"timed_out,omitempty"`
	StartedAt  time.Time  `json:"started_at"`
	EndedAt    *time.Time `json:"ended_at,omitempty"`
	StdoutSize int64      `json:"stdout_size"` // bytes written so far
	StderrSize int64      `json:"stderr_size"`
	// Acked is whether any output was acknowledged (and dropped): a
	// stream can then no longer start at offset 0. A sandbox forked
	// from a memory image has its parent's acknowledged.
	Acked bool `json:"acked,omitempty"`
	// StdoutStart and StderrStart are the offsets of the first bytes
	// den-init still holds: a stream can be read from there on.
	StdoutStart int64 `json:"stdout_start,omitempty"`
	StderrStart int64 `json:"stderr_start,omitempty"`
	// LimitHit says which limit the process ran into (LimitMemory,
	// LimitPIDs); "" when none.
	LimitHit string `json:"limit_hit,omitempty"`
}

// Frame kinds of GET /v1/procs/{id}/stream. Each frame is one kind byte, a
// 4-byte big-endian payload length, and the payload. The stream ends with
// one FrameExit whose payload is the JSON ProcStatus, sent only after every
// output byte.
//
// POST /v1/procs?stream=1 starts a process and answers with the same
// stream, from offset 0, preceded by one FrameStarted whose payload is the
// JSON ProcStatus: one round trip instead of two.
const (
	FrameStdout  byte = 1
	FrameStderr  byte = 2
	FrameExit    byte = 3
	FrameStarted byte = 4
)

// FileInfo describes a file inside the sandbox.
type FileInfo struct {
	Name    string    `json:"name"`
	Path    string    `json:"path"`
	Size    int64     `json:"size"`
	Mode    uint32    `json:"mode"` // permission bits only
	Type    string    `json:"type"` // file, dir, symlink, other
	ModTime time.Time `json:"mod_time"`
	Target  string    `json:"target,omitempty"`
	// UID and GID own the file; Owner and Group are their names in the
	// sandbox's passwd and group files, "" when they have none.
	UID   uint32 `json:"uid"`
	GID   uint32 `json:"gid"`
	Owner string `json:"owner,omitempty"`
	Group string `json:"group,omitempty"`
	// Xattrs are a file's or directory's user extended attributes
	// (user.*), by full name; absent when it has none.
	Xattrs map[string]string `json:"xattrs,omitempty"`
}

// WatchEvent is one line of GET /v1/files/watch: a change to Name, a path
// relative to the watched directory ("" for the directory itself).
type WatchEvent struct {
	Name string `json:"name"`
	Op   string `json:"op"` // one of the Watch* ops
}

// What changed, as E2B's envd (fsnotify) tells it.
const (
	WatchCreate = "create" // made, or moved in
	WatchWrite  = "write"
	WatchRemove = "remove" // the watched directory itself ends the stream
	WatchRename = "rename" // moved away
	WatchChmod  = "chmod"  // mode, owner or times changed
	// WatchOverflow: changes came faster than they were read, and some
	// were lost.
	WatchOverflow = "overflow"
)

// Info is the body of GET /v1/ping.
type Info struct {
	Version string    `json:"version"`
	BootID  string    `json:"boot_id"` // random per den-init start; kept by a restore, which continues the same processes
	Started time.Time `json:"started"`
	// Procs is how many processes other than den-init are alive in the
	// sandbox, whoever started them (a command's `server &` included).
	Procs int `json:"procs"`
	// OOMKills is how many processes den-init killed to keep the sandbox
	// under its memory limit (Limits) since it started.
	OOMKills int `json:"oom_kills,omitempty"`
	// LimitChecks is how many times den-init woke by itself to check
	// the sandbox's limits since it started: each wakes the whole
	// sandbox, which a quiet one watched from the host is spared.
	LimitChecks int64 `json:"limit_checks,omitempty"`
}

// Process is one process in the sandbox, as GET /v1/ps lists it.
type Process struct {
	PID      int    `json:"pid"`
	PPID     int    `json:"ppid"`
	Name     string `json:"name"`    // the kernel's short name
	Command  string `json:"command"` // its arguments, space-separated
	State    string `json:"state"`   // R running, S sleeping, T stopped, ...
	RSSBytes int64  `json:"rss_bytes"`
	// Secrets marks a process that may hold a secret in its memory: one
	// started with secrets, or in its process group or session, or below
	// one of those.
	Secrets bool `json:"secrets,omitempty"`
}

// Error is the body of every non-2xx answer from den-init.
type Error struct {
	Code    string `json:"code"` // invalid, not_found, conflict, too_large, unavailable, internal
	Message string `json:"message"`
}

// RekeyRequest is the body of POST /v1/rekey: den-init accepts only Token
// from then on. Limits, when set, are applied first, as POST /v1/limits
// would: dend settles both on every boot and wake, in one round trip.
type RekeyRequest struct {
	Token  string  `json:"token"`
	Limits *Limits `json:"limits,omitempty"`
}

// RekeyResponse is the answer (200) to a rekey that brought limits.
// den-inits from before limits came with the rekey ignore them and answer
// 204 with no body: the caller then sets them on their own.
type RekeyResponse struct {
	LimitsSet bool `json:"limits_set"`
}

// ClaimRequest is the body of POST /v1/claim: a den-init booted ahead
// of demand (a warm pool's) becomes a sandbox's. Like Rekey it accepts
// only Token from then on; it also starts a new BootID and Started, as a
// fresh boot would, and refuses (409 conflict) when any process other
// than den-init lives or ever ran: a claimed instance carries nothing
// from its time in the pool.
//
// Hostname, when set, becomes the sandbox's host name, through the helper
// the host started in the instance beforehand (HostnameHelperArg); 404
// not_found, changing nothing, when there is none.
type ClaimRequest struct {
	Token    string `json:"token"`
	Hostname string `json:"hostname,omitempty"`
}

// SetHostnameArg, as den-init's first argument, makes it set the
// sandbox's host name to its second and exit: the host runs it once with
// the capability that needs (runsc exec --cap CAP_SYS_ADMIN), which no
// process in the sandbox has.
const SetHostnameArg = "--den-sethostname"

// HostnameHelperArg, as den-init's only argument, makes it wait on
// den-init's hostname socket for the name a claim brings, set it and
// exit: the host starts it in a warm instance ahead of the claim (runsc
// exec --detach --cap CAP_SYS_ADMIN), so a claim costs no engine call.
const HostnameHelperArg = "--den-hostname-helper"

// BindViewsArg, as den-init's first argument, makes it bind each view
// found at an odd argument onto the mount point that follows it, read-only,
// in place of whatever was mounted there, and exit; UnbindViewsArg makes
// it unmount every mount point it is given. The host runs them with the
// capability mounts need (runsc exec --cap CAP_SYS_ADMIN), which no
// process in the sandbox has, to place peer views elsewhere than under
// the views directory while the sandbox runs.
const (
	BindViewsArg   = "--den-bind-views"
	UnbindViewsArg = "--den-unbind-views"
)

// MinTokenLen is the shortest token den-init accepts from Rekey.
const MinTokenLen = 16
