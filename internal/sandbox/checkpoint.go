package sandbox

import (
	"fmt"
	"regexp"
	"time"

	"github.com/den-dev/den/internal/errdefs"
)

// Checkpoint is an immutable moment of a sandbox: a read-only snapshot of
// its root filesystem and, unless it is files-only, the memory and process
// image the engine saved at the same instant.
type Checkpoint struct {
	ID         string
	SandboxID  string
	Name       string // the user's label; unique among a sandbox's checkpoints when set
	Kind       string // CheckpointManual, CheckpointHibernate or CheckpointFork
	Parent     string // the checkpoint the sandbox's state descended from, or ""
	Memory     bool   // it holds a memory image, not only files
	Generation int64  // the instance it was taken from
	Manifest   Manifest
	CreatedAt  time.Time
	// Location says whether its bytes are only on the host that made
	// it, or also in the blob store (see fleet.go).
	Location string
	// Blobs is where its bytes are in the blob store once uploaded.
	Blobs Blobs
	// NeededBy names the sandboxes that depend on it (hibernated on it,
	// or created from it while alive); filled by the Service, not stored.
	NeededBy []string
}

// Checkpoint kinds: why it was taken.
const (
	CheckpointManual    = "manual"    // asked for with `den checkpoint`
	CheckpointHibernate = "hibernate" // the saved state of a hibernated sandbox
	CheckpointFork      = "fork"      // the capture children of a live fork start from
)

func (c *Checkpoint) clone() *Checkpoint {
	d := *c
	d.Manifest.Files = append([]ImageFile(nil), c.Manifest.Files...)
	d.NeededBy = append([]string(nil), c.NeededBy...)
	d.Blobs.Files = append([]BlobLayer(nil), c.Blobs.Files...)
	return &d
}

// Where a checkpoint's bytes are.
const (
	LocationLocal     = "local"     // on the host that made it only
	LocationUploading = "uploading" // being copied to the blob store
	LocationUploaded  = "uploaded"  // in the blob store too: it survives its host
)

// Blobs is where a checkpoint's or an image's bytes are in the blob store:
// the manifests of the streams that make them again.
type Blobs struct {
	// Format is how its files were sent: "btrfs-send" or "tar".
	Format string `json:"format,omitempty"`
	// Files makes its files: a whole volume first, then each diff on the
	// one before, the last making this volume.
	Files []BlobLayer `json:"files,omitempty"`
	// Memory is the manifest of its memory image, or "".
	Memory string `json:"memory,omitempty"`
	// SentBytes is what uploading it sent: the chunks the blob store
	// lacked, compressed. StreamBytes is what its own streams hold.
	SentBytes   int64 `json:"sent_bytes,omitempty"`
	StreamBytes int64 `json:"stream_bytes,omitempty"`
}

// BlobLayer is one stream of a volume's chain.
type BlobLayer struct {
	Manifest string `json:"manifest"`
	// Volume is the storage key of the volume the stream makes.
	Volume string `json:"volume"`
}

// Manifests are every manifest b refers to.
func (b Blobs) Manifests() []string {
	var ids []string
	for _, l := range b.Files {
		ids = append(ids, l.Manifest)
	}
	if b.Memory != "" {
		ids = append(ids, b.Memory)
	}
	return ids
}

// VolumeKey is the storage key of the checkpoint's read-only filesystem.
func (c *Checkpoint) VolumeKey() string { return "checkpoints/" + c.ID }

// Manifest is what a restore needs to know before it tries: the engine and
// host it was made for, and what to check the memory image against.
type Manifest struct {
	Engine EngineInfo `json:"engine"`
	// SpecHash covers the parts of the engine spec a restore validates
	// (mounts, process, capabilities), so a den upgrade that changes them
	// is refused up front instead of failing inside the engine.
	SpecHash string `json:"spec_hash,omitempty"`
	// Spec is the sandbox's spec when it was taken: a sandbox created from
	// the checkpoint gets the same.
	Spec Spec `json:"spec"`
	// Files are the memory image's files with their size and CRC-32C.
	Files       []ImageFile `json:"files,omitempty"`
	MemoryBytes int64       `json:"memory_bytes"` // total size of the memory image
	FilesBytes  int64       `json:"files_bytes"`  // size of the filesystem snapshot
	// InitToken is the token den-init in the memory image accepts; a
	// restore uses it once to hand the new instance its own.
	InitToken string `json:"init_token,omitempty"`
	// Init is the version of den-init in the memory image: its process
	// needs that binary back, whatever den-init dend has now.
	Init string `json:"init,omitempty"`
	// Sealed is the id of the images key the memory image was sealed
	// with, or "" for a plaintext image.
	Sealed string `json:"sealed,omitempty"`
}

// ImageFile is one file of a memory image.
type ImageFile struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	CRC32C uint32 `json:"crc32c"`
}

// EngineInfo is what a memory image is only valid for.
type EngineInfo struct {
	Version     string   `json:"version"`
	Flags       []string `json:"flags"`
	CPUFeatures []string `json:"cpu_features,omitempty"`
}

// Compatible says why a memory image made by e cannot be restored by the
// engine here, or returns nil when it can.
func (e EngineInfo) Compatible(here EngineInfo) error {
	if e.Version != here.Version {
		return errdefs.WithHint(
			errdefs.Conflict("checkpoint was made by runsc %s, this host runs %s", e.Version, here.Version),
			"memory images only restore on the exact engine version that made them: use a host running that version, or boot its files without processes with `den recover NAME --cold`")
	}
	if fmt.Sprint(e.Flags) != fmt.Sprint(here.Flags) {
		return errdefs.WithHint(
			errdefs.Conflict("checkpoint was made with engine flags %v, this host uses %v", e.Flags, here.Flags),
			"use a dend configured like the one that made it, or boot its files without processes with `den recover NAME --cold`")
	}
	have := map[string]bool{}
	for _, f := range here.CPUFeatures {
		have[f] = true
	}
	var missing []string
	for _, f := range e.CPUFeatures {
		if !have[f] {
			missing = append(missing, f)
		}
	}
	if len(missing) > 0 {
		return errdefs.WithHint(
			errdefs.Conflict("checkpoint needs CPU features this host lacks: %v", missing),
			"restore it on a host with the same CPU, or boot its files without processes with `den recover NAME --cold`")
	}
	return nil
}

// CheckpointParams is what a caller asks for when checkpointing.
type CheckpointParams struct {
	Name   string // optional label
	FSOnly bool   // files only: no memory image
}

var labelRE = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9._-]{0,62}$`)

// ValidateLabel checks a checkpoint label.
func ValidateLabel(label string) error {
	if label == "" || labelRE.MatchString(label) {
		return nil
	}
	return errdefs.WithHint(errdefs.Invalid("invalid checkpoint name %q", label),
		"use 1-63 letters, digits, dots, dashes and underscores, starting with a letter or digit")
}

// ForkParams is what a caller asks for when forking.
type ForkParams struct {
	Name  string // the child's name; with Count > 1, children are NAME-1 … NAME-N
	From  string // a checkpoint of the parent (id or name); "" forks the live sandbox
	Count int    // how many children; default 1
	Owner string // id of the API token forking; "" for admin callers
}

// MaxForkCount bounds one fork request.
const MaxForkCount = 64

// RecoverParams says how to bring back a sandbox in error.
type RecoverParams struct {
	// Mode is RecoverRetry, RecoverCold or RecoverRollback.
	Mode string
	// Checkpoint is, for RecoverRollback, the checkpoint to go back to;
	// "" takes the newest one before the failed one.
	Checkpoint string
}

// Ways back from error.
const (
	RecoverRetry    = "retry"    // restore the same checkpoint again
	RecoverCold     = "cold"     // boot fresh from the checkpoint's files, losing its processes
	RecoverRollback = "rollback" // restore an earlier checkpoint
)
