// Package memimage is the memory images of a host's checkpoints on disk
// (Images): each in a directory of its own under one root, named by its
// checkpoint's id; the files the engine writes into it, written out
// behind the engine while it writes them, synced so that an image
// recorded complete survives the host's crash, listed with their sizes
// and CRC-32C sums, and checked against such a list before a restore;
// sealed under the images key for a sandbox ever granted secrets, and
// opened into memory again for a restore (grant.Seal, grant.Open).
//
// It knows an image by its checkpoint's id (or its directory) and the
// key it was sealed with, and nothing else: it never imports
// internal/sandbox, and knows nothing of checkpoints' records, sandboxes'
// states or the engine. Deciding when to make, sync, sum, seal or check
// an image is the core's.
package memimage
