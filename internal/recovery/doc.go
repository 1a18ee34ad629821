// Package recovery settles sandboxes when the core cannot carry on as it
// was: the `den recover` verb (repair.go: a sandbox in error retried from
// the checkpoint it failed to come back from, booted cold from its
// files, rolled back to an earlier checkpoint, or, recorded on a node
// since lost, taken over by the fleet), and, when dend starts, making
// the records and this host agree again (diskcap.go: every sandbox's
// volume under the pool's disk rules, a default cap for one made before
// there was one).
//
// It sits above the sandbox core: it imports internal/sandbox and uses
// only the Service's exported verbs and steps (WithSandbox, WithRecord,
// RecoverLocked, ...) and the adapters internal/daemon hands it (the
// store, the engine, the network, the volumes). It must never be
// imported by internal/sandbox, never move a sandbox between states but
// through the core's steps, and never reach into the Service's own state
// (its maps and locks).
package recovery
