// Package networking is the verb that changes what a sandbox may reach
// (SetNetwork, `den network`, PUT /v1/sandboxes/{name}/network): it
// checks the policy and the private ranges its owner may name, applies
// it at once to a sandbox with an instance (running or paused), and
// records it, putting the old policy back in place if the record fails.
// A stopped or hibernated sandbox gets the policy when it next boots.
//
// It sits above the sandbox core: it imports internal/sandbox and uses
// only the Service's exported verbs (WithSandbox, CheckReach,
// EnforceNetworkLocked, Record); the REST door reaches it through
// httpapi.NetworkService, wired in internal/daemon. What a policy is and
// its checks are internal/netpolicy's; attaching a new instance to the
// network under its policy, and the check of a create's policy, stay in
// the core (netpolicy.go). It keeps no state; it must never be imported
// by internal/sandbox, and never reach into the Service's maps or lock.
package networking
