package sandbox

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/peers"
)

// Peering (package peers): a sandbox sees a read-only view of another
// sandbox's files. The core keeps the verbs: it checks the sandbox's state,
// locks it and OTHER, and records the views in its spec.

// PeerParams is what a caller asks for when adding or refreshing a view.
type PeerParams struct {
	// Other is OTHER, by name or id, as the caller may see it.
	Other string
	// Checkpoint is a checkpoint of OTHER to show instead of its files
	// now; id or name.
	Checkpoint string
	// At is the mount point; default peers.Root/OTHER.
	At string
	// Restart lets den restart a running or paused sandbox to apply the
	// change (its processes end, its files stay); without it only a
	// stopped sandbox's peers change.
	Restart bool
	// Reader is who reads OTHER: the owner identity of the caller ("":
	// none, no sandbox is readable), or AnyOwner for admins, who may read
	// every sandbox.
	Reader   string
	AnyOwner bool
}

// ViewMount is a read-only view mounted into an instance.
type ViewMount struct {
	Source      string // host path of the view
	Destination string // mount point inside
}

// viewMounts are the views sb's instances mount.
func (s *Service) viewMounts(sb *Sandbox) []ViewMount {
	var ms []ViewMount
	for _, p := range sb.Spec.Peers {
		ms = append(ms, ViewMount{Source: s.cfg.Volumes.Path(p.View), Destination: p.At})
	}
	return ms
}

// Peers returns a sandbox's views.
func (s *Service) Peers(ctx context.Context, ref string) ([]peers.Peer, error) {
	sb, err := s.Get(ctx, ref)
	if err != nil {
		return nil, err
	}
	return slices.Clone(sb.Spec.Peers), nil
}

// readable finds OTHER as p's reader may see it: a sandbox of another
// owner is not found, in the words for one that does not exist.
func (s *Service) readable(ctx context.Context, p PeerParams) (*Sandbox, error) {
	var sb *Sandbox
	var err error
	switch {
	case p.AnyOwner:
		sb, err = s.Get(ctx, p.Other)
	case p.Reader == "":
		return nil, NotFound(p.Other) // "" owns only admins' sandboxes
	default:
		sb, err = s.GetOwned(ctx, p.Reader, p.Other)
	}
	if err == nil && sb.State == StateDestroyed {
		return nil, NotFound(p.Other)
	}
	return sb, err
}

// AddPeer gives sandbox ref a read-only view of OTHER's files at p.At.
func (s *Service) AddPeer(ctx context.Context, ref string, p PeerParams) (*Sandbox, *peers.Peer, error) {
	sb, err := s.Get(ctx, ref)
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
	if err := s.checkPeerChange(sb, p.Restart, "add a peer to"); err != nil {
		return nil, nil, err
	}
	if err := peers.Addable(sb.Name, sb.Spec.Peers, p.At); err != nil {
		return nil, nil, err
	}
	// OTHER is read before sb is locked, and never while it is: two
	// sandboxes peering with each other at once must not wait on each
	// other.
	peer := peers.Peer{ID: newID(8), SandboxID: other.ID, Sandbox: other.Name, At: p.At}
	peer.View = peers.ViewKey(sb.ID, peer.ID)
	if err := s.takeView(ctx, sb, other.ID, p.Checkpoint, &peer); err != nil {
		return nil, nil, err
	}
	msg := fmt.Sprintf("peer %s added at %s", peers.Describe(peer), peer.At)
	sb, err = s.changePeers(ctx, sb.ID, p.Restart, msg, func(sb *Sandbox) (string, error) {
		if err := peers.Addable(sb.Name, sb.Spec.Peers, p.At); err != nil {
			return "", err
		}
		sb.Spec.Peers = append(sb.Spec.Peers, peer)
		return "", nil
	})
	if err != nil {
		s.views.Drop(context.WithoutCancel(ctx), peer.View)
		return nil, nil, err
	}
	return sb, &peer, nil
}

// RefreshPeer takes view peer of sandbox ref again: OTHER's files as
// they are now, or the checkpoint p.Checkpoint of OTHER.
func (s *Service) RefreshPeer(ctx context.Context, ref, peerRef string, p PeerParams) (*Sandbox, *peers.Peer, error) {
	sb, err := s.Get(ctx, ref)
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
	if err := s.checkPeerChange(sb, p.Restart, "refresh a peer of"); err != nil {
		return nil, nil, err
	}
	peer := *old
	peer.ID = newID(8)
	peer.View = peers.ViewKey(sb.ID, peer.ID)
	if err := s.takeView(ctx, sb, old.SandboxID, p.Checkpoint, &peer); err != nil {
		return nil, nil, err
	}
	var dropped string
	msg := fmt.Sprintf("peer %s at %s refreshed", peers.Describe(peer), peer.At)
	sb, err = s.changePeers(ctx, sb.ID, p.Restart, msg, func(sb *Sandbox) (string, error) {
		i := slices.IndexFunc(sb.Spec.Peers, func(q peers.Peer) bool { return q.ID == old.ID })
		if i < 0 {
			return "", errdefs.Conflict("view %s of sandbox %q changed meanwhile", old.At, sb.Name)
		}
		dropped = sb.Spec.Peers[i].View
		sb.Spec.Peers[i] = peer
		return dropped, nil
	})
	if err != nil {
		s.views.Drop(context.WithoutCancel(ctx), peer.View)
		return nil, nil, err
	}
	return sb, &peer, nil
}

// RemovePeer takes view peerRef away from sandbox ref.
func (s *Service) RemovePeer(ctx context.Context, ref, peerRef string, restart bool) (*Sandbox, error) {
	sb, err := s.Get(ctx, ref)
	if err != nil {
		return nil, err
	}
	old, err := peers.Find(sb.Name, sb.Spec.Peers, peerRef)
	if err != nil {
		return nil, err
	}
	if err := s.checkPeerChange(sb, restart, "remove a peer of"); err != nil {
		return nil, err
	}
	msg := fmt.Sprintf("peer %s at %s removed", peers.Describe(*old), old.At)
	return s.changePeers(ctx, sb.ID, restart, msg, func(sb *Sandbox) (string, error) {
		i := slices.IndexFunc(sb.Spec.Peers, func(q peers.Peer) bool { return q.ID == old.ID })
		if i < 0 {
			return "", errdefs.Conflict("view %s of sandbox %q was removed meanwhile", old.At, sb.Name)
		}
		dropped := sb.Spec.Peers[i].View
		sb.Spec.Peers = slices.Delete(sb.Spec.Peers, i, i+1)
		return dropped, nil
	})
}

// checkPeerChange refuses, before anything is done, a change to sb's
// peers its state does not allow.
func (s *Service) checkPeerChange(sb *Sandbox, restart bool, action string) error {
	if err := s.elsewhere(sb); err != nil {
		return err
	}
	switch sb.State {
	case StateStopped:
		return nil
	case StateRunning, StatePaused:
		if restart {
			return nil
		}
		return errdefs.WithHint(errdefs.Conflict("cannot %s sandbox %q while it is %s: a view is mounted when it boots", action, sb.Name, sb.State),
			"pass --restart to restart it now (its processes end, its files stay), or stop it first with `den stop "+sb.Name+"`")
	case StateHibernated:
		return errdefs.WithHint(errdefs.Conflict("cannot %s sandbox %q while it is hibernated: its memory image needs the views it slept with", action, sb.Name),
			"resume it first with `den resume "+sb.Name+"`, then use --restart, or stop it")
	}
	return require(sb, action, StateStopped, StateRunning, StatePaused)
}

// takeView makes peer.View, a read-only snapshot of OTHER's files as they
// are now, or of its checkpoint ckRef, and fills in what it shows. OTHER
// is locked meanwhile, so no verb replaces its files under the snapshot;
// a running OTHER is synced first, as a checkpoint is.
func (s *Service) takeView(ctx context.Context, sb *Sandbox, otherID, ckRef string, peer *peers.Peer) error {
	other, unlock, err := s.lockSandbox(ctx, otherID)
	if err != nil {
		return err
	}
	defer unlock()
	if other.Node != sb.Node {
		return errdefs.Conflict("sandbox %q is on node %s and %q on node %s: a view is taken where both are", other.Name, other.Node, sb.Name, sb.Node)
	}
	peer.Sandbox = other.Name
	peer.TakenAt = s.cfg.Now().UTC()
	peer.Checkpoint = ""
	if ckRef != "" {
		ck, err := s.findCheckpoint(ctx, other, ckRef)
		if err != nil {
			return err
		}
		defer s.pin(ck.ID)()
		if err := s.ensureLocal(ctx, ck); err != nil {
			return err
		}
		if err := s.views.Take(ctx, ck.VolumeKey(), peer.View); err != nil {
			return fmt.Errorf("taking the view of checkpoint %s of %q: %w", ck.ID, other.Name, err)
		}
		peer.Checkpoint = ck.ID
		return nil
	}
	switch other.State {
	case StateRunning:
		if err := s.guestFor(other).Sync(ctx); err != nil {
			return fmt.Errorf("flushing the files of sandbox %q: %w", other.Name, err)
		}
	case StatePaused, StateHibernated, StateStopped, StateError:
	default:
		return require(other, "take a view of", StateRunning, StatePaused, StateHibernated, StateStopped)
	}
	if err := s.views.Take(ctx, other.VolumeKey(), peer.View); err != nil {
		return fmt.Errorf("taking the view of %q: %w", other.Name, err)
	}
	return nil
}

// changePeers applies change to sandbox id's peers under its lock: a
// stopped sandbox's record only, a running or paused one's by stopping
// it, recording the change and booting it again when restart allows.
// change returns the view it let go, which is removed once the new
// record is written.
func (s *Service) changePeers(ctx context.Context, id string, restart bool, msg string, change func(*Sandbox) (string, error)) (*Sandbox, error) {
	sb, unlock, err := s.lockSandbox(ctx, id)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := s.checkPeerChange(sb, restart, "change the peers of"); err != nil {
		return nil, err
	}
	// Checked before the instance goes: a change that cannot be made
	// leaves the sandbox as it was.
	probe := *sb
	probe.Spec.Peers = slices.Clone(sb.Spec.Peers)
	if _, err := change(&probe); err != nil {
		return nil, err
	}
	boot := sb.State != StateStopped
	if boot {
		if err := s.stopLocked(ctx, sb, "stopping to change its peers"); err != nil {
			return nil, err
		}
	}
	dropped, err := change(sb)
	if err != nil {
		return nil, err
	}
	if err := s.record(ctx, sb, EventPeers, msg); err != nil {
		return nil, err
	}
	if dropped != "" {
		s.views.Drop(context.WithoutCancel(ctx), dropped)
	}
	if boot {
		if err := s.startLocked(ctx, sb); err != nil {
			return nil, err
		}
	}
	return sb, nil
}

// planViews gives a sandbox being made from ck, whose spec is spec and
// id is id, views of its own of the peers ck was taken with, and returns
// what each is to be copied from (peers.Plan): the views of ck's sandbox
// it had then if they are still there, else those it has now at the same
// mount points (its memory image needs views at the same places).
// Nothing is copied yet: views.Copy does, once the new sandbox's record
// names them, so an undo removes its views and never its origin's.
func (s *Service) planViews(ctx context.Context, id string, spec *Spec, ck *Checkpoint) ([]string, error) {
	if len(spec.Peers) == 0 {
		return nil, nil
	}
	var now []peers.Peer
	if src, err := s.cfg.Store.GetSandbox(ctx, ck.SandboxID); err == nil && src.State != StateDestroyed {
		now = src.Spec.Peers
	}
	kept := func(view string) bool {
		_, err := s.cfg.Volumes.Stat(ctx, view)
		return err == nil
	}
	plan, from, missing := peers.Plan(id, spec.Peers, now, kept, func() string { return newID(8) })
	if missing != nil {
		return nil, errdefs.WithHint(errdefs.Conflict("checkpoint %s was taken with a view of %s at %s, which is gone", ck.ID, missing.Sandbox, missing.At),
			"its files alone can be booted: take a files-only checkpoint of a sandbox without that peer")
	}
	spec.Peers = plan
	return from, nil
}
