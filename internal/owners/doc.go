// Package owners keeps what an admin grants each owner identity: its
// quota and the private ranges its network rules may name (its grants),
// read with what its sandboxes use now, changed and reset (the verbs
// behind /v1/owners). The records themselves are internal/quota's
// Owner, kept in a quota.OwnerStore.
//
// It sits above the sandbox core: it imports internal/sandbox and uses
// only the Service's exported verbs (QuotaOf, UseOf, LockOwner, Reach),
// and the doors reach it through the interface they declare
// (httpapi.OwnerService), wired in internal/daemon. It must never be
// imported by internal/sandbox, never change a sandbox or admit a verb
// (admission against quotas stays in the core), and never reach into
// the Service's own state (its maps and locks).
package owners
