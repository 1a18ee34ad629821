// Package checkpointgc removes the checkpoints nothing needs any more:
// at each of the idle policy's ticks and once more when dend stops
// cleanly (Collect), and at once when a verb lets go of some (Freed).
// It takes those of destroyed sandboxes and the ones den took for its
// own use (hibernation, fork captures) once no sandbox needs them, keeps
// in a fleet with a blob store each sandbox's last upload, drops memory
// images sent ahead of a hand-over that did not happen, and removes
// checkpoint files a crash left without a record.
//
// It sits above the sandbox core: it imports internal/sandbox and uses
// only the Service's exported primitives (Needs, Pinned, WithRecord,
// DeleteCheckpointLocked, DropCheckpointFiles, MemoryDir, ...); the core
// calls it only through the hook it declares (sandbox.Collector), filled
// by internal/daemon. It must never be imported by internal/sandbox,
// never change a sandbox's state but through the Service's verbs, and
// never reach into the Service's own state (its maps and locks): what
// pins a checkpoint is the core's, which it asks through Pinned.
package checkpointgc
