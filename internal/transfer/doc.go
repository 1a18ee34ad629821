// Package transfer keeps the file transfers under way in each sandbox
// (Registry): it wraps den-init's file calls (Files) so that each call is
// a transfer, counted as use of its sandbox while it lasts, and ends
// them all, with an error saying why, when the sandbox is about to sleep.
//
// It knows sandboxes by id and name only. It never imports
// internal/sandbox and knows nothing of sandboxes' states: its caller
// says when a sandbox sleeps (Registry.End) and counts use through the
// hold func it hands to NewRegistry. The Registry has its own lock.
package transfer
