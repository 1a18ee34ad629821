package api

import "time"

// Peer is a read-only view a sandbox has of another sandbox's files: a
// snapshot of them (or of one of its checkpoints) taken when the view was
// added or last refreshed, or with Live the files as they are, mounted at
// At. The other sandbox never sees it, and its removal leaves a snapshot
// view as it was.
type Peer struct {
	// ID names the view, as does its mount point.
	ID string `json:"id"`
	// Sandbox is the name the other sandbox had when the view was taken.
	Sandbox   string `json:"sandbox"`
	SandboxID string `json:"sandbox_id"`
	// At is where the view appears inside the sandbox.
	At string `json:"at"`
	// Checkpoint is the checkpoint of the other sandbox the view shows;
	// "" when it shows its files as they were at TakenAt.
	Checkpoint string    `json:"checkpoint,omitempty"`
	TakenAt    time.Time `json:"taken_at"`
	// Live views show the other sandbox's files as they are, not a
	// snapshot.
	Live bool `json:"live,omitempty"`
}

// PeerList is the body of GET /v1/sandboxes/{name}/peers.
type PeerList struct {
	Peers []Peer `json:"peers"`
}

// AddPeerRequest is the body of POST /v1/sandboxes/{name}/peers.
type AddPeerRequest struct {
	// Sandbox is the other sandbox, by name or id.
	Sandbox string `json:"sandbox"`
	// Checkpoint is a checkpoint of the other sandbox to show instead of
	// its files now.
	Checkpoint string `json:"checkpoint,omitempty"`
	// At is the mount point; default /peers/SANDBOX.
	At string `json:"at,omitempty"`
	// Live shows the other sandbox's files as they are, read-only,
	// without a refresh, instead of a snapshot.
	Live bool `json:"live,omitempty"`
	// Restart has dend restart a running or paused sandbox to apply the
	// change (its processes end, its files stay). A view under /peers
	// needs none; one elsewhere only changes while the sandbox is
	// stopped, or with Restart.
	Restart bool `json:"restart,omitempty"`
}

// RefreshPeerRequest is the body of POST
// /v1/sandboxes/{name}/peers/{peer}/refresh; it may be empty.
type RefreshPeerRequest struct {
	// Checkpoint shows that checkpoint of the other sandbox; "" its
	// files as they are now.
	Checkpoint string `json:"checkpoint,omitempty"`
	Restart    bool   `json:"restart,omitempty"`
}
