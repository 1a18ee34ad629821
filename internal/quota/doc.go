// Package quota decides whether a verb may make or grow sandboxes: the
// Gate the core asks at create, fork, import, restore, checkpoint and a
// change of limits, which checks what the host has and the process
// maximum, owners' quotas and their records (Quota, Owner, Quotas), the
// admission that keeps two verbs of one owner from both passing a quota
// with room for one (Admission), and how sandboxes' disk caps share the
// pool (DiskPolicy, Ledger).
//
// It knows owners by identity and resources by number. It never imports
// internal/sandbox and knows nothing of sandboxes' states or records:
// what an owner holds, the caps already promised and how full the pool
// is are counted by its caller (Books). It never writes a record nor
// applies a limit. Each type with state has its own lock.
package quota
