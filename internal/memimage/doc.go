// Package memimage is a checkpoint's memory image on disk: the files the
// engine writes into an image's directory, written out behind the engine
// while it writes them, synced so that an image recorded complete
// survives the host's crash, listed with their sizes and CRC-32C sums,
// and checked against such a list before a restore.
//
// It knows an image by its directory and nothing else: it never imports
// internal/sandbox, and knows nothing of checkpoints' records, sandboxes'
// states, the engine or where images live. Deciding when to sync, sum or
// check, and what a mismatch means to a user, is the core's.
package memimage
