package cluster

import "time"

// A node's sandboxes run only while it surely holds its lease: at most
// one live copy of a sandbox, as a StatefulSet's pod. Each renewal tells
// the node until when that is, by its own clock: from before it asked,
// one lease on, less FenceMargin (MemberConfig.Renewed). Its dend passes
// that on to every sandbox's den-init, which stops the sandbox's
// processes when the time passes without a newer word (a dend killed or
// cut off from the database says nothing more). Another node may declare
// it lost, and so take its sandboxes over, only FenceGrace after its
// lease ran out by the database's clock: by then the fence certainly
// took effect. Both ends count durations only (a lease of the database's
// clock, den-init's timer of the sandbox's), so the clocks of the hosts
// need not agree.

// FenceMargin is how long before its lease runs out, by its own count, a
// node's sandboxes are stopped: it covers the word's way to den-init.
// A lease is renewed three times over, so one renewal may fail without
// stopping anything.
func FenceMargin(lease time.Duration) time.Duration { return lease / 6 }

// FenceGrace is how long after a node's lease ran out another node may
// declare it lost: it covers the way of the last word to den-init, a
// den-init that waits for its host after a pause or restore (1 s at
// most), and the stopping itself.
const FenceGrace = 3 * time.Second
