// Package rebase gives a sandbox a new root from an image version while
// it keeps what is its own (Rebase: a files-only checkpoint first, a
// fresh snapshot of the image, the kept paths copied over, a cold boot
// as the next generation, its setup steps run again, and a rollback to
// the checkpoint if any of that fails), and changes the setup steps and
// kept paths a rebase uses (SetSetup).
//
// It sits above the sandbox core: it imports internal/sandbox and uses
// only the Service's exported verbs (WithSandbox, AdmitCheckpoint,
// CheckpointFilesLocked, NextGenerationLocked, NewRootLocked,
// BootLocked, RunSetupLocked, RestoreLocked, ...), and the doors reach it
// through the interface they declare (httpapi.RebaseService), wired in
// internal/daemon. What the core must do itself stays there: running
// setup steps at create, checking steps and kept paths (ValidateSetup,
// Spec.KeptPaths), and settling, when dend starts, a rebase a restart
// cut short. It must never be imported by internal/sandbox, never change
// a sandbox's state but through the Service's verbs, and never reach
// into the Service's own state (its maps and locks).
package rebase
