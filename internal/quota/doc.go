// Package quota decides what owners and the storage pool may still be
// promised: owners' quotas and their records (Quota, Owner, Quotas), the
// admission that keeps two verbs of one owner from both passing a quota
// with room for one (Admission), and how sandboxes' disk caps share the
// pool (DiskPolicy, Ledger).
//
// It knows owners by identity and resources by number. It never imports
// internal/sandbox and knows nothing of sandboxes' states or records:
// what an owner holds is counted by its caller (a count function passed
// to Admission.Reserve), and the caps already promised are added up by
// its caller too. Each type with state has its own lock.
package quota
