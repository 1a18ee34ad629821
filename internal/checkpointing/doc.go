// Package checkpointing holds the checkpoints' verbs that change no
// sandbox's state: listing a sandbox's checkpoints (`den checkpoints`,
// GET /v1/sandboxes/{name}/checkpoints), reading one, and removing one
// no sandbox needs (`den checkpoint rm`), each answering with the names
// of the sandboxes that need a checkpoint.
//
// It sits above the sandbox core: it imports internal/sandbox and uses
// only the Service's exported verbs (Get, WithSandbox, CheckpointOf,
// Needs, FillNeededBy, DeleteCheckpointLocked) and the checkpoints'
// records; the REST door reaches it through httpapi.CheckpointService,
// wired in internal/daemon. Taking a checkpoint, restoring one,
// retention and finding one anywhere (FindCheckpoint, which a create
// from a checkpoint uses) stay in the core; removing the ones nothing
// needs is internal/checkpointgc's. It keeps no state; it must never be
// imported by internal/sandbox, never reach into the Service's maps or
// locks, and never move a sandbox between states.
package checkpointing
