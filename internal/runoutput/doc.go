// Package runoutput keeps the output of runs on dend's host: each stream
// of a run as pieces of files that hold its head and tail within a cap
// (Keeper), read back from any offset with markers where bytes were
// dropped (Reader); the room that output may take, a free-space reserve
// on the disk and an allowance per sandbox whose oldest ended runs are
// pruned to make room (Space); the runs being collected (Collecting);
// and the clients following runs (Followers).
//
// It never imports internal/sandbox: it knows runs and sandboxes by id
// and nothing of sandboxes' states, and what it needs of run records it
// asks through Runs. It never talks to den-init: the collector in the
// core moves output from the guest and hands it to a Keeper.
package runoutput
