package peering

import (
	"context"
	"fmt"
	"slices"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/peers"
	"github.com/den-dev/den/internal/sandbox"
)

// checkChange refuses, before anything is done, a change to sb's peers
// its state does not allow.
func (s *Service) checkChange(sb *sandbox.Sandbox, restart bool, action string) error {
	if err := s.sandboxes.Elsewhere(sb); err != nil {
		return err
	}
	switch sb.State {
	case sandbox.StateStopped:
		return nil
	case sandbox.StateRunning, sandbox.StatePaused:
		if restart {
			return nil
		}
		return errdefs.WithHint(errdefs.Conflict("cannot %s sandbox %q while it is %s: a view is mounted when it boots", action, sb.Name, sb.State),
			"pass --restart to restart it now (its processes end, its files stay), or stop it first with `den stop "+sb.Name+"`")
	case sandbox.StateHibernated:
		return errdefs.WithHint(errdefs.Conflict("cannot %s sandbox %q while it is hibernated: its memory image needs the views it slept with", action, sb.Name),
			"resume it first with `den resume "+sb.Name+"`, then use --restart, or stop it")
	}
	return sandbox.Require(sb, action, sandbox.StateStopped, sandbox.StateRunning, sandbox.StatePaused)
}

// takeView makes peer.View, a read-only snapshot of OTHER's files as they
// are now, or of its checkpoint ckRef, and fills in what it shows. OTHER
// is locked meanwhile, so no verb replaces its files under the snapshot;
// a running OTHER is synced first, as a checkpoint is.
func (s *Service) takeView(ctx context.Context, sb *sandbox.Sandbox, otherID, ckRef string, peer *peers.Peer) error {
	return s.sandboxes.WithSandbox(ctx, otherID, func(other *sandbox.Sandbox) error {
		if other.Node != sb.Node {
			return errdefs.Conflict("sandbox %q is on node %s and %q on node %s: a view is taken where both are", other.Name, other.Node, sb.Name, sb.Node)
		}
		peer.Sandbox = other.Name
		peer.TakenAt = s.now().UTC()
		peer.Checkpoint = ""
		if ckRef != "" {
			return s.takeCheckpointView(ctx, other, ckRef, peer)
		}
		switch other.State {
		case sandbox.StateRunning:
			if err := s.sandboxes.SyncFiles(ctx, other); err != nil {
				return fmt.Errorf("flushing the files of sandbox %q: %w", other.Name, err)
			}
		case sandbox.StatePaused, sandbox.StateHibernated, sandbox.StateStopped, sandbox.StateError:
		default:
			return sandbox.Require(other, "take a view of", sandbox.StateRunning, sandbox.StatePaused, sandbox.StateHibernated, sandbox.StateStopped)
		}
		if err := s.views.Take(ctx, other.VolumeKey(), peer.View); err != nil {
			return fmt.Errorf("taking the view of %q: %w", other.Name, err)
		}
		return nil
	})
}

// takeCheckpointView makes peer.View a read-only snapshot of checkpoint
// ckRef of other, whose lifecycle lock the caller holds.
func (s *Service) takeCheckpointView(ctx context.Context, other *sandbox.Sandbox, ckRef string, peer *peers.Peer) error {
	ck, err := s.sandboxes.CheckpointOf(ctx, other, ckRef)
	if err != nil {
		return err
	}
	defer s.sandboxes.Pin(ck.ID)()
	if err := s.sandboxes.EnsureLocal(ctx, ck); err != nil {
		return err
	}
	if err := s.views.Take(ctx, ck.VolumeKey(), peer.View); err != nil {
		return fmt.Errorf("taking the view of checkpoint %s of %q: %w", ck.ID, other.Name, err)
	}
	peer.Checkpoint = ck.ID
	return nil
}

// changePeers applies change to sandbox id's peers under its lock: a
// stopped sandbox's record only, a running or paused one's by stopping
// it, recording the change and booting it again when restart allows.
// change returns the view it let go, which is removed once the new
// record is written.
func (s *Service) changePeers(ctx context.Context, id string, restart bool, msg string, change func(*sandbox.Sandbox) (string, error)) (*sandbox.Sandbox, error) {
	var changed *sandbox.Sandbox
	err := s.sandboxes.WithSandbox(ctx, id, func(sb *sandbox.Sandbox) error {
		if err := s.checkChange(sb, restart, "change the peers of"); err != nil {
			return err
		}
		// Checked before the instance goes: a change that cannot be made
		// leaves the sandbox as it was.
		probe := *sb
		probe.Spec.Peers = slices.Clone(sb.Spec.Peers)
		if _, err := change(&probe); err != nil {
			return err
		}
		boot := sb.State != sandbox.StateStopped
		if boot {
			if err := s.sandboxes.StopLocked(ctx, sb, "stopping to change its peers"); err != nil {
				return err
			}
		}
		dropped, err := change(sb)
		if err != nil {
			return err
		}
		if err := s.sandboxes.Record(ctx, sb, sandbox.EventPeers, msg); err != nil {
			return err
		}
		if dropped != "" {
			s.views.Drop(context.WithoutCancel(ctx), dropped)
		}
		if boot {
			if err := s.sandboxes.StartLocked(ctx, sb); err != nil {
				return err
			}
		}
		changed = sb
		return nil
	})
	if err != nil {
		return nil, err
	}
	return changed, nil
}
