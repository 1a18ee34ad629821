// Package retention says which of a node's checkpoints may go: which of
// a sandbox's manual checkpoints its retention policy removes (Drops),
// and the pins that keep any checkpoint from removal while a verb works
// with it (Pins).
//
// It never imports internal/sandbox and removes nothing: it knows
// checkpoints by what the core hands it (an id, whether taken on
// request, when, whether a sandbox needs it), and the core removes what
// it names. Pins are per node by design: a verb pins a checkpoint on the
// node it runs on, and only that node's removals look at them.
package retention
