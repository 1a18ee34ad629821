// Package peering holds the verbs that change a sandbox's peers, its
// read-only views of other sandboxes' files: listing them (Peers),
// adding one (AddPeer), taking one again (RefreshPeer) and taking one
// away (RemovePeer). What a view is, the rules for one and the views'
// storage are internal/peers'; this package checks the sandbox's state,
// finds OTHER as the caller may see it, takes the view under OTHER's
// lock, and records the change under the sandbox's, restarting it when
// asked to.
//
// It sits above the sandbox core: it imports internal/sandbox and uses
// only the Service's exported verbs (WithSandbox, Record, StopLocked,
// StartLocked, Pin, ...), and the doors reach it through the interface
// they declare (httpapi.PeerService), wired in internal/daemon. What
// create, fork and boot need of views (planning a fork's, mounting them)
// stays in the core. It must never be imported by internal/sandbox,
// never change a sandbox's state but through the Service's verbs, and
// never reach into the Service's own state (its maps and locks).
package peering
