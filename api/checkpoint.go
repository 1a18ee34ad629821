package api

import "time"

// Checkpoint kinds: why a checkpoint was taken.
const (
	CheckpointManual    = "manual"    // asked for with POST .../checkpoints
	CheckpointHibernate = "hibernate" // the saved state of a hibernated sandbox
	CheckpointFork      = "fork"      // the capture the children of a live fork start from
)

// Checkpoint is an immutable moment of a sandbox: a read-only snapshot of
// its files and, unless it is files-only, its memory and processes.
type Checkpoint struct {
	ID      string `json:"id"`
	Sandbox string `json:"sandbox"`        // the id of the sandbox it was taken from
	Name    string `json:"name,omitempty"` // the user's label, unique within its sandbox
	Kind    string `json:"kind"`           // manual, hibernate or fork
	// Parent is the checkpoint the sandbox's state descended from: the
	// links make a tree of a sandbox's history.
	Parent        string    `json:"parent,omitempty"`
	Memory        bool      `json:"memory"` // holds memory and processes, not only files
	Generation    int64     `json:"generation"`
	EngineVersion string    `json:"engine_version,omitempty"` // the runsc that made its memory image
	MemoryBytes   int64     `json:"memory_bytes"`
	FilesBytes    int64     `json:"files_bytes"`
	CreatedAt     time.Time `json:"created_at"`
	// NeededBy names the sandboxes that depend on it, which keep it from
	// being removed.
	NeededBy []string `json:"needed_by,omitempty"`
	// Location is where its bytes are: local (on the host that made it
	// only), uploading, or uploaded (in the blob store too, so it
	// survives its host). Always local on a dend without --blobs.
	Location string `json:"location"`
	// UploadedBytes is what uploading it sent to the blob store: the
	// chunks the store lacked, compressed; 0 until uploaded.
	UploadedBytes int64 `json:"uploaded_bytes,omitempty"`
}

// Where a checkpoint's bytes are, for Checkpoint.Location.
const (
	LocationLocal     = "local"
	LocationUploading = "uploading"
	LocationUploaded  = "uploaded"
)

// BlobCollection is the answer of POST /v1/admin/blobs/gc: what the
// collection of the blob store kept and removed.
type BlobCollection struct {
	Manifests        int   `json:"manifests"`         // manifests kept
	ManifestsRemoved int   `json:"manifests_removed"` // named by no record, past the grace period
	MissingManifests int   `json:"missing_manifests"` // named by a record but not in the blob store
	Chunks           int   `json:"chunks"`            // chunks kept
	ChunksRemoved    int   `json:"chunks_removed"`
	BytesRemoved     int64 `json:"bytes_removed"` // compressed bytes freed
}

// CheckpointList is the body of GET /v1/sandboxes/{name}/checkpoints.
type CheckpointList struct {
	Checkpoints []Checkpoint `json:"checkpoints"`
}

// CheckpointRequest is the body of POST /v1/sandboxes/{name}/checkpoints.
type CheckpointRequest struct {
	Name   string `json:"name,omitempty"`    // optional label
	FSOnly bool   `json:"fs_only,omitempty"` // files only, no memory image
}

// RestoreRequest is the body of POST /v1/sandboxes/{name}/restore.
type RestoreRequest struct {
	Checkpoint string `json:"checkpoint"` // id or name
}

// ForkRequest is the body of POST /v1/sandboxes/{name}/fork.
type ForkRequest struct {
	// Name is the child's name; with Count above 1 the children are
	// NAME-1 … NAME-N.
	Name  string `json:"name"`
	From  string `json:"from,omitempty"`  // a checkpoint (id or name); absent forks the live sandbox
	Count int    `json:"count,omitempty"` // how many children; default 1
}

// Ways back from error, for RecoverRequest.Mode.
const (
	RecoverRetry    = "retry"    // restore the same checkpoint again
	RecoverCold     = "cold"     // boot fresh from the checkpoint's files, losing its processes
	RecoverRollback = "rollback" // restore an earlier checkpoint
)

// RecoverRequest is the body of POST /v1/sandboxes/{name}/recover.
type RecoverRequest struct {
	Mode string `json:"mode,omitempty"` // retry (the default), cold or rollback
	// Checkpoint is, for rollback, the checkpoint to go back to; absent
	// takes the newest one before the failed one.
	Checkpoint string `json:"checkpoint,omitempty"`
}
