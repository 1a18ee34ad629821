// Package fleet is what a dend does as one node of several: it passes
// the node's lease on to its sandboxes' den-inits (the fence), moves
// sandboxes to other nodes through the blob store and adopts those they
// hand over (sending a checkpoint ahead, straight to the target, while it
// uploads), records the sandboxes of a node declared lost, and says what
// brings them back.
//
// It sits above the sandbox core: it imports internal/sandbox and uses
// only the Service's exported verbs, and the core calls it only through
// the small interfaces it declares (sandbox.Lease). internal/daemon makes
// its types only when dend is a node of a fleet; a single-host dend never
// makes them. It must never be imported by internal/sandbox, and never
// change a sandbox's state but through the Service's verbs.
package fleet
