// Package fleet is what a dend does beyond its own host: it keeps
// checkpoints and images in the blob store (Blobs: uploads in the
// background, downloads when a restore needs them, collection), and, as
// one node of several (Node, Fence), passes the node's lease on to its
// sandboxes' den-inits, moves sandboxes to other nodes through the blob
// store and adopts those they hand over (sending a checkpoint ahead,
// straight to the target, while it uploads), fences its sandboxes by
// its lease, records the sandboxes of a node declared lost, says what
// brings them back, and takes one over when a recovery is asked here.
//
// It sits above the sandbox core: it imports internal/sandbox and uses
// only the Service's exported verbs, and the core calls it only through
// the small interfaces it declares (sandbox.Lease, sandbox.BlobStore);
// internal/recovery asks it to take a sandbox over (recovery.TakeOver).
// internal/daemon makes Blobs only with a blob store (--blobs), and
// Node and Fence only in a fleet; a single-host dend makes none of them.
// It must never be imported by internal/sandbox, never change a
// sandbox's state but through the Service's verbs, and never reach into
// the Service's own state (its maps and locks).
package fleet
