package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/den-dev/den/api"
)

// Pause freezes a running sandbox in RAM: its processes keep their memory
// and use no CPU until Resume.
func (c *Client) Pause(ctx context.Context, name string) (*api.Sandbox, error) {
	return c.sandboxCall(ctx, http.MethodPost, sandboxPath(name, "pause"), nil)
}

// Resume brings a paused or hibernated sandbox back to running, its
// processes continuing where they were.
func (c *Client) Resume(ctx context.Context, name string) (*api.Sandbox, error) {
	return c.sandboxCall(ctx, http.MethodPost, sandboxPath(name, "resume"), nil)
}

// Hibernate saves a running or paused sandbox's memory and processes to
// disk and frees its RAM; Resume restores it.
func (c *Client) Hibernate(ctx context.Context, name string) (*api.Sandbox, error) {
	return c.sandboxCall(ctx, http.MethodPost, sandboxPath(name, "hibernate"), nil)
}

// CheckpointOptions says what checkpoint to take.
type CheckpointOptions struct {
	Name   string // an optional label, unique among the sandbox's checkpoints
	FSOnly bool   // files only: no memory image, so a restore boots afresh
}

// Checkpoint takes a checkpoint of a sandbox: its files and, unless
// FSOnly, its memory and processes, at one instant.
func (c *Client) Checkpoint(ctx context.Context, name string, opts CheckpointOptions) (*api.Checkpoint, error) {
	var ck api.Checkpoint
	req := api.CheckpointRequest{Name: opts.Name, FSOnly: opts.FSOnly}
	if err := c.do(ctx, http.MethodPost, sandboxPath(name, "checkpoints"), nil, req, &ck); err != nil {
		return nil, err
	}
	return &ck, nil
}

// Checkpoints lists a sandbox's checkpoints, oldest first. Their Parent
// links make a tree.
func (c *Client) Checkpoints(ctx context.Context, name string) ([]api.Checkpoint, error) {
	var l api.CheckpointList
	if err := c.do(ctx, http.MethodGet, sandboxPath(name, "checkpoints"), nil, nil, &l); err != nil {
		return nil, err
	}
	return l.Checkpoints, nil
}

// GetCheckpoint returns one checkpoint of a sandbox, by id or name.
func (c *Client) GetCheckpoint(ctx context.Context, name, ckpt string) (*api.Checkpoint, error) {
	var ck api.Checkpoint
	if err := c.do(ctx, http.MethodGet, sandboxPath(name, "checkpoints", url.PathEscape(ckpt)), nil, nil, &ck); err != nil {
		return nil, err
	}
	return &ck, nil
}

// RemoveCheckpoint deletes a checkpoint of a sandbox. One a sandbox still
// needs (see Checkpoint.NeededBy) is refused with a conflict.
func (c *Client) RemoveCheckpoint(ctx context.Context, name, ckpt string) error {
	return c.do(ctx, http.MethodDelete, sandboxPath(name, "checkpoints", url.PathEscape(ckpt)), nil, nil, nil)
}

// Restore rewinds a sandbox in place to one of its checkpoints (id or
// name), as a new generation.
func (c *Client) Restore(ctx context.Context, name, ckpt string) (*api.Sandbox, error) {
	return c.sandboxCall(ctx, http.MethodPost, sandboxPath(name, "restore"), api.RestoreRequest{Checkpoint: ckpt})
}

// ForkOptions says what children to make.
type ForkOptions struct {
	// Name is the child's name; with Count above 1 the children are
	// NAME-1 … NAME-N.
	Name string
	// From is a checkpoint of the parent (id or name) to fork from; ""
	// forks the live sandbox.
	From string
	// Count is how many children to make; 0 means 1.
	Count int
}

// Fork makes new sandboxes that start as copies of one, and returns them.
func (c *Client) Fork(ctx context.Context, name string, opts ForkOptions) ([]api.Sandbox, error) {
	var l api.SandboxList
	req := api.ForkRequest{Name: opts.Name, From: opts.From, Count: opts.Count}
	if err := c.do(ctx, http.MethodPost, sandboxPath(name, "fork"), nil, req, &l); err != nil {
		return nil, err
	}
	return l.Sandboxes, nil
}

// RecoverOptions says how to bring back a sandbox in error.
type RecoverOptions struct {
	// Mode is api.RecoverRetry, api.RecoverCold or api.RecoverRollback;
	// "" is retry.
	Mode string
	// Checkpoint is, for rollback, the checkpoint to go back to; "" takes
	// the newest one before the one that failed.
	Checkpoint string
}

// Recover brings a sandbox in error back to running.
func (c *Client) Recover(ctx context.Context, name string, opts RecoverOptions) (*api.Sandbox, error) {
	req := api.RecoverRequest{Mode: opts.Mode, Checkpoint: opts.Checkpoint}
	if req.Mode == "" {
		req.Mode = api.RecoverRetry
	}
	return c.sandboxCall(ctx, http.MethodPost, sandboxPath(name, "recover"), req)
}

// SetPolicy changes the fields of a sandbox's idle policy that p sets;
// nil fields keep their value. The answer carries the policy in effect:
//
//	sb, err := c.SetPolicy(ctx, "web", api.Policy{HibernateAfter: new("15m"), TTL: new("0")})
func (c *Client) SetPolicy(ctx context.Context, name string, p api.Policy) (*api.Sandbox, error) {
	return c.sandboxCall(ctx, http.MethodPatch, sandboxPath(name, "policy"), p)
}

// CollectBlobs collects dend's blob store now: the manifests no
// checkpoint names and the chunks only they used go, once older than
// dend's grace period. Admins only; unavailable without a blob store.
func (c *Client) CollectBlobs(ctx context.Context) (*api.BlobCollection, error) {
	var out api.BlobCollection
	if err := c.do(ctx, http.MethodPost, "/admin/blobs/gc", nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
