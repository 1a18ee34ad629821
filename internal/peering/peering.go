package peering

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/peers"
	"github.com/den-dev/den/internal/sandbox"
)

// Params is what a caller asks for when adding or refreshing a view.
type Params struct {
	// Other is OTHER, by name or id, as the caller may see it.
	Other string
	// Checkpoint is a checkpoint of OTHER to show instead of its files
	// now; id or name.
	Checkpoint string
	// At is the mount point; default peers.Root/OTHER.
	At string
	// Live shows OTHER's files as they are, read-only, instead of a
	// snapshot of them.
	Live bool
	// Restart has den restart a running or paused sandbox to apply the
	// change (its processes end, its files stay). A view under
	// peers.Root of a sandbox made since views change live needs none;
	// any other only changes while the sandbox is stopped, or with it.
	Restart bool
	// Reader is who reads OTHER: the owner identity of the caller ("":
	// none, no sandbox is readable), or AnyOwner for admins, who may read
	// every sandbox.
	Reader   string
	AnyOwner bool
}

// Config is what a Service changes peers through.
type Config struct {
	// Sandboxes is this node's sandbox core: it finds and locks
	// sandboxes, records their changes, and stops and boots them.
	Sandboxes *sandbox.Service
	// Volumes is the storage pool the views are snapshots in, the
	// core's.
	Volumes peers.Volumes
	// ViewsDir holds the sandboxes' views directories, the core's
	// (sandbox.Config.ViewsDir); "" when views change only at boot.
	ViewsDir string
	// Logger gets failures to remove a view.
	Logger *slog.Logger
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// Service changes sandboxes' peers. It keeps no state of its own: the
// views a sandbox has are in its spec.
type Service struct {
	sandboxes *sandbox.Service
	volumes   peers.Volumes
	views     *peers.Views
	now       func() time.Time
}

// New returns the peers' verbs over cfg.
func New(cfg Config) *Service {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Service{sandboxes: cfg.Sandboxes, volumes: cfg.Volumes, views: peers.NewViews(cfg.Volumes, cfg.ViewsDir, cfg.Logger), now: cfg.Now}
}

// Peers returns a sandbox's views.
func (s *Service) Peers(ctx context.Context, ref string) ([]peers.Peer, error) {
	sb, err := s.sandboxes.Get(ctx, ref)
	if err != nil {
		return nil, err
	}
	return slices.Clone(sb.Spec.Peers), nil
}

// readable finds OTHER as p's reader may see it: a sandbox of another
// owner is not found, in the words for one that does not exist.
func (s *Service) readable(ctx context.Context, p Params) (*sandbox.Sandbox, error) {
	var sb *sandbox.Sandbox
	var err error
	switch {
	case p.AnyOwner:
		sb, err = s.sandboxes.Get(ctx, p.Other)
	case p.Reader == "":
		return nil, sandbox.NotFound(p.Other) // "" owns only admins' sandboxes
	default:
		sb, err = s.sandboxes.GetOwned(ctx, p.Reader, p.Other)
	}
	if err == nil && sb.State == sandbox.StateDestroyed {
		return nil, sandbox.NotFound(p.Other)
	}
	return sb, err
}

// AddPeer gives sandbox ref a read-only view of OTHER's files at p.At.
func (s *Service) AddPeer(ctx context.Context, ref string, p Params) (*sandbox.Sandbox, *peers.Peer, error) {
	sb, err := s.sandboxes.Get(ctx, ref)
	if err != nil {
		return nil, nil, err
	}
	other, err := s.readable(ctx, p)
	if err != nil {
		return nil, nil, err
	}
	if other.ID == sb.ID {
		return nil, nil, errdefs.WithHint(errdefs.Invalid("sandbox %q cannot peer with itself", sb.Name),
			"its own files are at / already; name another sandbox")
	}
	if p.At == "" {
		p.At = peers.Root + "/" + other.Name
	}
	if err := peers.ValidateMountPoint(p.At); err != nil {
		return nil, nil, err
	}
	if err := checkLive(p); err != nil {
		return nil, nil, err
	}
	if err := s.checkChange(sb, p.Restart, p.At, "add a peer to"); err != nil {
		return nil, nil, err
	}
	if err := peers.Addable(sb.Name, sb.Spec.Peers, p.At); err != nil {
		return nil, nil, err
	}
	// OTHER is read before sb is locked, and never while it is: two
	// sandboxes peering with each other at once must not wait on each
	// other.
	peer := peers.Peer{ID: sandbox.NewID(8), SandboxID: other.ID, Sandbox: other.Name, At: p.At, Live: p.Live}
	if !peer.Live {
		peer.View = peers.ViewKey(sb.ID, peer.ID)
	}
	if err := s.takeView(ctx, sb, other.ID, p.Checkpoint, &peer); err != nil {
		return nil, nil, err
	}
	msg := fmt.Sprintf("peer %s added at %s", peers.Describe(peer), peer.At)
	place := func(sb *sandbox.Sandbox) (func(), error) {
		undo := func() { s.views.Unmount(sb.ID, peer.At) }
		if err := s.views.Mount(sb.ID, peer, s.source(peer)); err != nil {
			return undo, err
		}
		if err := s.bind(ctx, sb, peer); err != nil {
			return undo, err
		}
		return func() {
			if bound(peer.At) {
				s.sandboxes.UnbindViewsLocked(context.WithoutCancel(ctx), sb, peer.At)
			}
			undo()
		}, nil
	}
	sb, err = s.changePeers(ctx, sb.ID, p.Restart, peer.At, msg, func(sb *sandbox.Sandbox) (string, error) {
		if err := peers.Addable(sb.Name, sb.Spec.Peers, p.At); err != nil {
			return "", err
		}
		sb.Spec.Peers = append(sb.Spec.Peers, peer)
		return "", nil
	}, place)
	if err != nil {
		s.views.Drop(context.WithoutCancel(ctx), peer.View)
		return nil, nil, err
	}
	return sb, &peer, nil
}

// RefreshPeer takes view peer of sandbox ref again: OTHER's files as
// they are now, or the checkpoint p.Checkpoint of OTHER.
func (s *Service) RefreshPeer(ctx context.Context, ref, peerRef string, p Params) (*sandbox.Sandbox, *peers.Peer, error) {
	sb, err := s.sandboxes.Get(ctx, ref)
	if err != nil {
		return nil, nil, err
	}
	old, err := peers.Find(sb.Name, sb.Spec.Peers, peerRef)
	if err != nil {
		return nil, nil, err
	}
	// The caller must still be allowed to read OTHER.
	p.Other = old.SandboxID
	if _, err := s.readable(ctx, p); err != nil {
		if errors.Is(err, errdefs.ErrNotFound) {
			return nil, nil, errdefs.WithHint(errdefs.NotFound("sandbox %q, which view %s shows, is gone", old.Sandbox, old.At),
				fmt.Sprintf("the view keeps what it showed; remove it with `den peer rm %s %s`", sb.Name, old.ID))
		}
		return nil, nil, err
	}
	p.Live = old.Live
	if err := checkLive(p); err != nil {
		return nil, nil, err
	}
	if err := s.checkChange(sb, p.Restart, old.At, "refresh a peer of"); err != nil {
		return nil, nil, err
	}
	peer := *old
	peer.ID = sandbox.NewID(8)
	if !peer.Live {
		peer.View = peers.ViewKey(sb.ID, peer.ID)
	}
	if err := s.takeView(ctx, sb, old.SandboxID, p.Checkpoint, &peer); err != nil {
		return nil, nil, err
	}
	var dropped string
	msg := fmt.Sprintf("peer %s at %s refreshed", peers.Describe(peer), peer.At)
	// The new view replaces the old one in one step (Views.Mount): a
	// lookup sees one or the other, never an empty mount point. A view
	// bound elsewhere keeps the directory it was bound from, so den-init
	// binds it again.
	place := func(sb *sandbox.Sandbox) (func(), error) {
		undo := func() {
			s.views.Mount(sb.ID, *old, s.source(*old))
			s.bind(context.WithoutCancel(ctx), sb, *old)
		}
		if err := s.views.Mount(sb.ID, peer, s.source(peer)); err != nil {
			return undo, err
		}
		return undo, s.bind(ctx, sb, peer)
	}
	sb, err = s.changePeers(ctx, sb.ID, p.Restart, peer.At, msg, func(sb *sandbox.Sandbox) (string, error) {
		i := slices.IndexFunc(sb.Spec.Peers, func(q peers.Peer) bool { return q.ID == old.ID })
		if i < 0 {
			return "", errdefs.Conflict("view %s of sandbox %q changed meanwhile", old.At, sb.Name)
		}
		dropped = sb.Spec.Peers[i].View
		sb.Spec.Peers[i] = peer
		return dropped, nil
	}, place)
	if err != nil {
		s.views.Drop(context.WithoutCancel(ctx), peer.View)
		return nil, nil, err
	}
	return sb, &peer, nil
}

// RemovePeer takes view peerRef away from sandbox ref.
func (s *Service) RemovePeer(ctx context.Context, ref, peerRef string, restart bool) (*sandbox.Sandbox, error) {
	sb, err := s.sandboxes.Get(ctx, ref)
	if err != nil {
		return nil, err
	}
	old, err := peers.Find(sb.Name, sb.Spec.Peers, peerRef)
	if err != nil {
		return nil, err
	}
	if err := s.checkChange(sb, restart, old.At, "remove a peer of"); err != nil {
		return nil, err
	}
	msg := fmt.Sprintf("peer %s at %s removed", peers.Describe(*old), old.At)
	place := func(sb *sandbox.Sandbox) (func(), error) {
		undo := func() {
			s.views.Mount(sb.ID, *old, s.source(*old))
			s.bind(context.WithoutCancel(ctx), sb, *old)
		}
		if bound(old.At) {
			if err := s.sandboxes.UnbindViewsLocked(ctx, sb, old.At); err != nil {
				return undo, err
			}
		}
		s.views.Unmount(sb.ID, old.At)
		return undo, nil
	}
	return s.changePeers(ctx, sb.ID, restart, old.At, msg, func(sb *sandbox.Sandbox) (string, error) {
		i := slices.IndexFunc(sb.Spec.Peers, func(q peers.Peer) bool { return q.ID == old.ID })
		if i < 0 {
			return "", errdefs.Conflict("view %s of sandbox %q was removed meanwhile", old.At, sb.Name)
		}
		dropped := sb.Spec.Peers[i].View
		sb.Spec.Peers = slices.Delete(sb.Spec.Peers, i, i+1)
		return dropped, nil
	}, place)
}
