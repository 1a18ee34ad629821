// Package cluster makes several dends one fleet over one PostgreSQL
// database: each registers as a node and keeps a lease by heartbeat
// (member.go), a node whose lease runs out is declared lost by any other,
// and a request for a sandbox another node runs is forwarded to it
// (forward.go), authenticated by a key every node of the fleet holds
// (key.go). There is no consensus, gossip or replication of den's own:
// the database's transactions and clock decide.
package cluster

import (
	"context"
	"time"
)

// State is where a node stands in the fleet.
type State string

const (
	// StateActive: its lease is kept and new sandboxes may be placed on it.
	StateActive State = "active"
	// StateDraining: its lease is kept, but its sandboxes are being moved
	// or put to sleep and nothing new is placed on it.
	StateDraining State = "draining"
	// StateLost: its lease ran out. It may not act for any sandbox until
	// it joins again, as a new epoch.
	StateLost State = "lost"
)

// Info is what a node reports of itself when it joins and at each
// heartbeat.
type Info struct {
	CPUs          int   `json:"cpus"`
	MemoryBytes   int64 `json:"memory_bytes"`
	DiskFreeBytes int64 `json:"disk_free_bytes"`
	Sandboxes     int   `json:"sandboxes"` // running or paused on it
	// What the limits of those sandboxes add up to.
	CommittedMemoryBytes int64    `json:"committed_memory_bytes"`
	CommittedCPUs        float64  `json:"committed_cpus"`
	DenVersion           string   `json:"den_version"`
	RunscVersion         string   `json:"runsc_version"`
	CPUFeatures          []string `json:"cpu_features,omitempty"`
}

// Node is one node's record.
type Node struct {
	Name string
	// Epoch counts the times a dend joined as this node; a heartbeat of
	// an older epoch is refused (fencing).
	Epoch        int64
	PeerURL      string
	State        State
	Reason       string
	Info         Info
	JoinedAt     time.Time
	HeartbeatAt  time.Time
	LeaseExpires time.Time
}

// Registry is where nodes are recorded: the PostgreSQL store implements
// it.
type Registry interface {
	// JoinNode records n as active with a lease of ttl and an epoch one
	// past its last, and returns the record.
	JoinNode(ctx context.Context, n Node, ttl time.Duration) (Node, error)
	// RenewNode extends the lease of node name's epoch by ttl and records
	// info. A node another epoch holds, or one declared lost, is a
	// conflict (errdefs.ErrConflict): this dend must stop acting for it.
	RenewNode(ctx context.Context, name string, epoch int64, info Info, ttl time.Duration) (Node, error)
	// Nodes lists every node by name; Node finds one (errdefs.ErrNotFound).
	Nodes(ctx context.Context) ([]Node, error)
	Node(ctx context.Context, name string) (Node, error)
	// ExpireNodes declares lost, with reason, every active or draining
	// node whose lease ran out FenceGrace ago, and returns them.
	ExpireNodes(ctx context.Context, reason string) ([]Node, error)
	// SetNodeState moves a node whose lease is kept between active and
	// draining.
	SetNodeState(ctx context.Context, name string, to State) (Node, error)
	// RemoveNode deletes a lost node's record; one whose lease is kept,
	// or that sandboxes still name, is a conflict.
	RemoveNode(ctx context.Context, name string) error
}

// Alive reports whether n holds its lease at time now.
func (n Node) Alive(now time.Time) bool {
	return n.State != StateLost && now.Before(n.LeaseExpires)
}
