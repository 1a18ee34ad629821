package api

import "time"

// Node states.
const (
	NodeActive   = "active"   // keeps its lease; new sandboxes may go there
	NodeDraining = "draining" // keeps its lease; its sandboxes are put to sleep, nothing new goes there
	NodeLost     = "lost"     // its lease ran out
)

// Node is one dend of a fleet, as GET /v1/nodes reports it. A dend on
// SQLite is a fleet of one: itself, with no lease.
type Node struct {
	Name    string `json:"name"`
	State   string `json:"state"`
	Reason  string `json:"reason,omitempty"` // why it is lost
	Self    bool   `json:"self"`             // the node that answered
	PeerURL string `json:"peer_url,omitempty"`
	// Epoch counts the times a dend joined as this node.
	Epoch         int64    `json:"epoch,omitempty"`
	CPUs          int      `json:"cpus"`
	MemoryBytes   int64    `json:"memory_bytes"`
	DiskFreeBytes int64    `json:"disk_free_bytes"`
	Sandboxes     int      `json:"sandboxes"` // running or paused on it
	DenVersion    string   `json:"den_version"`
	RunscVersion  string   `json:"runsc_version"`
	CPUFeatures   []string `json:"cpu_features,omitempty"`
	// JoinedAt, HeartbeatAt and LeaseExpires are the database's clock;
	// absent outside a fleet.
	JoinedAt     *time.Time `json:"joined_at,omitempty"`
	HeartbeatAt  *time.Time `json:"heartbeat_at,omitempty"`
	LeaseExpires *time.Time `json:"lease_expires,omitempty"`
}

// NodeList is the body of GET /v1/nodes.
type NodeList struct {
	// Fleet is false for a dend on SQLite: one host, no leases.
	Fleet bool   `json:"fleet"`
	Nodes []Node `json:"nodes"`
}

// DrainResult is the answer of POST /v1/nodes/{node}/drain: the node, now
// draining, and what became of each sandbox it ran.
type DrainResult struct {
	Node       Node           `json:"node"`
	Moved      []DrainMove    `json:"moved,omitempty"` // with a blob store: to other nodes, processes intact
	Hibernated []string       `json:"hibernated"`      // without one, or when no node could take them
	Failed     []DrainFailure `json:"failed,omitempty"`
}

// DrainMove is a sandbox a drain moved, and where.
type DrainMove struct {
	Sandbox string `json:"sandbox"`
	To      string `json:"to"`
}

// DrainFailure is a sandbox a drain could not put to sleep.
type DrainFailure struct {
	Sandbox string `json:"sandbox"`
	Error   string `json:"error"`
}

// MoveSandboxRequest is the body of POST /v1/sandboxes/{name}/move.
type MoveSandboxRequest struct {
	To   string `json:"to"`             // the node it goes to
	Cold bool   `json:"cold,omitempty"` // files only: its processes are not kept
}

// AdoptRequest is the body of POST /v1/sandboxes/{name}/adopt, which only
// the nodes of a fleet call on each other: the node a sandbox is on hands
// it over to the node it asks.
type AdoptRequest struct {
	Cold bool `json:"cold,omitempty"`
}
