// Package limiting holds the verb that changes a sandbox's resource
// limits (`den limits`, PATCH /v1/sandboxes/{name}/limits): which limits
// a change sets, their check, the admission of the change against the
// host, the owner's quota and the storage pool, the volume's new disk
// cap (put back if the live instance refuses the rest), and the record.
//
// It sits above the sandbox core: it imports internal/sandbox and uses
// only the Service's exported steps (WithSandbox, Require, AdmitLimits,
// SetDiskCapLocked, ApplyLimitsLocked, Record), and the doors reach it
// through the interface they declare (httpapi.LimitService), wired in
// internal/daemon. What a boot, wake or resume tells den-init of limits,
// and applying them to a live instance, stay in the core
// (resources.go). It keeps no state; it must never be imported by
// internal/sandbox, and never reach into the Service's own state (its
// maps and locks).
package limiting
