// Package runoutput keeps the output of runs on dend's host: the
// collectors that move each run's output from den-init to the host, ack
// it once it is safe there and end the run when its process does
// (Collectors, Collector); each stream of a run as pieces of files that
// hold its head and tail within a cap (Keeper), read back from any offset
// with markers where bytes were dropped (Reader); the room that output
// may take, a free-space reserve on the disk and an allowance per sandbox
// whose oldest ended runs are pruned to make room (Space); the runs being
// collected, by sandbox and run id, with all of the above (Outputs); and
// the clients following runs (Followers).
//
// It never imports internal/sandbox: it knows runs and sandboxes by id
// and nothing of sandboxes' states or run records. What it needs of
// den-init it asks through Guest, in den-init's terms (process ids,
// streams, offsets); what it needs of run records it asks through Runs
// and the callbacks of Collected. The core records runs and decides when
// their collectors park, wake or are abandoned.
package runoutput
