// Package warm keeps this node's warm pools: instances of an image booted
// ahead of demand, so a create that fits one costs a claim instead of a
// boot. A pool instance has been made as a create would make it (its own
// root snapshot, runsc up, den-init answering, a namespace with no
// egress) but belongs to no sandbox and is in no record: the pools keep
// it in memory and note it in a file of its own (notes.go), so that a
// dend killed with pools up removes what it left when it starts again.
//
// Pools owns the pools' state behind its own lock: the targets set with
// `den image warm` (saved on disk), the instances ready by image, the
// boots under way, why a pool is held back, what one instance is
// estimated to hold, the host's memory and the reserve under which the
// pools shrink, and the quiet after a claim before a refill. Its filler
// (fill.go) tends the pools in the background, one step at a time.
//
// It never imports internal/sandbox and knows nothing of sandboxes, their
// states or records: it knows instances by id, image, build stamp and
// size. Making an instance on the host, tearing one down and telling an
// image's current build are the caller's (Host); so is claiming one for a
// create, which the core does with the instance Take hands it.
//
// The pools are this node's alone: in a fleet each dend keeps its own,
// and no other node ever sees their instances.
package warm
