// Package specs holds the rules what a user writes for a sandbox must
// follow, checked as written and before anything is made of it: names
// (a sandbox's, an image's, and those of the other things dend names:
// tokens, SSH keys), labels, environment variable names, setup steps, and
// the paths a rebase keeps. Each check answers an errdefs.Invalid (with a
// hint where one helps) naming what was wrong.
//
// It is a base package of pure functions: it keeps no state, touches no
// file or host, and imports nothing of den's but other base packages. It
// never imports internal/sandbox and knows nothing of a sandbox's states
// or records; the core's Spec.Validate, the doors and the adapters call
// it.
package specs
