package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/den-dev/den/api"
)

// AddPeer gives sandbox name a read-only view of another sandbox's files
// (req.Sandbox), at req.At (default /peers/OTHER): a snapshot taken now,
// of req.Checkpoint, or with req.Live the files as they are. A view under
// /peers appears while the sandbox runs; elsewhere a running or paused
// sandbox's peers change only with req.Restart, which restarts it (its
// processes end, its files stay). Another owner's sandbox is
// ErrNotFound, as one that does not exist.
//
//	p, err := c.AddPeer(ctx, "reviewer", api.AddPeerRequest{Sandbox: "coder", Live: true})
func (c *Client) AddPeer(ctx context.Context, name string, req api.AddPeerRequest) (*api.Peer, error) {
	var p api.Peer
	if err := c.do(ctx, http.MethodPost, sandboxPath(name, "peers"), nil, req, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// Peers lists sandbox name's views of other sandboxes.
func (c *Client) Peers(ctx context.Context, name string) ([]api.Peer, error) {
	var l api.PeerList
	if err := c.do(ctx, http.MethodGet, sandboxPath(name, "peers"), nil, nil, &l); err != nil {
		return nil, err
	}
	return l.Peers, nil
}

// RefreshPeer takes view peer (its id, or the other sandbox's name) of
// sandbox name again: the other sandbox's files as they are now, or
// req.Checkpoint of it.
func (c *Client) RefreshPeer(ctx context.Context, name, peer string, req api.RefreshPeerRequest) (*api.Peer, error) {
	var p api.Peer
	if err := c.do(ctx, http.MethodPost, sandboxPath(name, "peers", url.PathEscape(peer), "refresh"), nil, req, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// RemovePeer takes view peer away from sandbox name; restart as for
// AddPeer.
func (c *Client) RemovePeer(ctx context.Context, name, peer string, restart bool) error {
	var q url.Values
	if restart {
		q = url.Values{"restart": {"true"}}
	}
	return c.do(ctx, http.MethodDelete, sandboxPath(name, "peers", url.PathEscape(peer)), q, nil, nil)
}
