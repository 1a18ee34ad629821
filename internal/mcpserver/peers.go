package mcpserver

import (
	"context"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

// Peer is a read-only view a sandbox has of another sandbox's files.
type Peer struct {
	ID         string    `json:"id" jsonschema:"names the view, for peer_refresh and peer_remove (the other sandbox's name works too); a refresh names it anew"`
	Sandbox    string    `json:"sandbox" jsonschema:"the other sandbox"`
	At         string    `json:"at" jsonschema:"where its files appear inside this sandbox"`
	Checkpoint string    `json:"checkpoint,omitempty" jsonschema:"the checkpoint of the other sandbox it shows; none: its files as they were at taken_at"`
	TakenAt    time.Time `json:"taken_at"`
	Live       bool      `json:"live,omitempty" jsonschema:"it shows the other sandbox's files as they are, not a snapshot"`
}

func peerOf(p *api.Peer) Peer {
	return Peer{ID: p.ID, Sandbox: p.Sandbox, At: p.At, Checkpoint: p.Checkpoint, TakenAt: p.TakenAt, Live: p.Live}
}

// PeerList is peer_list's result.
type PeerList struct {
	Name  string `json:"name" jsonschema:"the sandbox whose views these are"`
	Peers []Peer `json:"peers"`
}

// restartDoc describes the restart argument of the tools that change
// peers: views under /peers change while a sandbox runs; gVisor fixes
// the other mounts when it boots.
const restartDoc = "restart a running or paused sandbox to apply it: its processes end, its files stay. " +
	"Only needed for a view outside /peers, which changes only while the sandbox is stopped or with restart"

// PeerAddInput is peer_add's arguments.
type PeerAddInput struct {
	Name       string `json:"name" jsonschema:"the sandbox that gets the view"`
	Other      string `json:"other" jsonschema:"the sandbox whose files it sees, read-only"`
	Checkpoint string `json:"checkpoint,omitempty" jsonschema:"show this checkpoint of the other sandbox instead of its files now"`
	At         string `json:"at,omitempty" jsonschema:"where the files appear (default /peers/OTHER)"`
	Live       bool   `json:"live,omitempty" jsonschema:"show the other sandbox's files as they are at every read, read-only, instead of a snapshot"`
	Restart    bool   `json:"restart,omitempty" jsonschema:"restart a running or paused sandbox to apply it: its processes end, its files stay. Only needed for a view outside /peers"`
}

// PeerRefreshInput is peer_refresh's arguments.
type PeerRefreshInput struct {
	Name       string `json:"name" jsonschema:"the sandbox that has the view"`
	Peer       string `json:"peer" jsonschema:"the view's id, or the other sandbox's name"`
	Checkpoint string `json:"checkpoint,omitempty" jsonschema:"show this checkpoint of the other sandbox (default: its files as they are now)"`
	Restart    bool   `json:"restart,omitempty" jsonschema:"restart a running or paused sandbox to apply it: its processes end, its files stay. Only needed for a view outside /peers"`
}

// PeerRemoveInput is peer_remove's arguments.
type PeerRemoveInput struct {
	Name    string `json:"name" jsonschema:"the sandbox that has the view"`
	Peer    string `json:"peer" jsonschema:"the view's id, or the other sandbox's name"`
	Restart bool   `json:"restart,omitempty" jsonschema:"restart a running or paused sandbox to apply it: its processes end, its files stay. Only needed for a view outside /peers"`
}

// PeerRemoved is peer_remove's result.
type PeerRemoved struct {
	Name    string `json:"name"`
	Removed string `json:"removed" jsonschema:"the view taken away"`
}

func (s *server) peerTools(srv *mcp.Server) {
	add(s, srv, &mcp.Tool{
		Name:        "peer_list",
		Title:       "List a sandbox's peers",
		Description: "List a sandbox's read-only views of other sandboxes' files: which sandbox, where they appear, and when they were taken.",
		Annotations: readOnly(),
	}, func(ctx context.Context, c *client.Client, _ *mcp.CallToolRequest, in SandboxRef) (PeerList, error) {
		ps, err := c.Peers(ctx, in.Name)
		if err != nil {
			return PeerList{}, err
		}
		out := PeerList{Name: in.Name, Peers: []Peer{}}
		for i := range ps {
			out.Peers = append(out.Peers, peerOf(&ps[i]))
		}
		return out, nil
	})

	add(s, srv, &mcp.Tool{
		Name:  "peer_add",
		Title: "Give a sandbox a view of another",
		Description: "Give a sandbox a read-only view of another of your sandboxes' files: as they are now (a snapshot), as one of its checkpoints, or live (live=true). " +
			"The other sandbox never sees it. A view under /peers appears while the sandbox runs; restart: " + restartDoc + ".",
		Annotations: changes(true, false),
	}, func(ctx context.Context, c *client.Client, _ *mcp.CallToolRequest, in PeerAddInput) (Peer, error) {
		if in.Other == "" {
			return Peer{}, invalid("no other sandbox: give other, the sandbox whose files it should see")
		}
		p, err := c.AddPeer(ctx, in.Name, api.AddPeerRequest{Sandbox: in.Other, Checkpoint: in.Checkpoint, At: in.At, Live: in.Live, Restart: in.Restart})
		if err != nil {
			return Peer{}, err
		}
		return peerOf(p), nil
	})

	add(s, srv, &mcp.Tool{
		Name:  "peer_refresh",
		Title: "Refresh a sandbox's view of another",
		Description: "Take a sandbox's view of another sandbox again: its files as they are now, or one of its checkpoints. " +
			"Restart: " + restartDoc + ".",
		Annotations: changes(true, false),
	}, func(ctx context.Context, c *client.Client, _ *mcp.CallToolRequest, in PeerRefreshInput) (Peer, error) {
		p, err := c.RefreshPeer(ctx, in.Name, in.Peer, api.RefreshPeerRequest{Checkpoint: in.Checkpoint, Restart: in.Restart})
		if err != nil {
			return Peer{}, err
		}
		return peerOf(p), nil
	})

	add(s, srv, &mcp.Tool{
		Name:  "peer_remove",
		Title: "Take a view away",
		Description: "Take a sandbox's view of another sandbox away; the other sandbox is untouched. " +
			"Restart: " + restartDoc + ".",
		Annotations: changes(true, true),
	}, func(ctx context.Context, c *client.Client, _ *mcp.CallToolRequest, in PeerRemoveInput) (PeerRemoved, error) {
		if err := c.RemovePeer(ctx, in.Name, in.Peer, in.Restart); err != nil {
			return PeerRemoved{}, err
		}
		return PeerRemoved{Name: in.Name, Removed: in.Peer}, nil
	})
}
