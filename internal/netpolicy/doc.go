// Package netpolicy holds the rules of what a sandbox's network may
// reach: a policy (Policy: a mode and its allow rules, as users write
// them with ParseRule, checked and put in canonical order by Validate),
// and den's own limit on what any rule may name (Reach: never den's
// network, the host, loopback, link-local, multicast or reserved ranges,
// and private ranges only where the operator opened them).
//
// It is pure rules: it keeps no state and holds no lock, and it never
// imports internal/sandbox or knows a sandbox's states. The core keeps a
// policy in each sandbox's spec and applies it through its Network port;
// internal/netns and internal/egress enforce it.
package netpolicy
