// Package export moves an agent between dens that share nothing: Export
// writes a sandbox's record and its newest checkpoint (files, and memory
// and processes unless files-only) as one archive sealed under a key of
// its own (imagecrypt's authenticated chunks), naming the secrets it
// needs but never their values; Import makes the same agent on another
// dend, or nothing at all.
//
// It sits above the sandbox core: it uses only the Service's exported
// verbs and steps (Checkpoint, WithSandbox, CheckpointFilesLocked, Pin,
// and for an import a create's checks, admission and records one step
// each: Admit, RecordNewLocked, TransitionLocked, ...) and the storage
// pool's Mover through internal/offsite; it never reaches into the
// Service's maps or lock, and the core never imports it. The REST door
// reaches it through httpapi.ExportService, wired in internal/daemon.
package export
