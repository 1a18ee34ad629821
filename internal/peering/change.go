package peering

import (
	"context"
	"fmt"
	"slices"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/peers"
	"github.com/den-dev/den/internal/sandbox"
)

// checkLive refuses a live view of a checkpoint: a checkpoint does not
// change.
func checkLive(p Params) error {
	if p.Live && p.Checkpoint != "" {
		return errdefs.WithHint(errdefs.Invalid("a live view shows the sandbox's files as they are, not checkpoint %q", p.Checkpoint),
			"drop --live to view the checkpoint, or drop --checkpoint to view the files live")
	}
	return nil
}

// liveHere says whether sb's view at at changes now, without a restart:
// sb boots with its views directory, and the view is in it; a view that
// den-init binds elsewhere (bound) needs den-init running, not paused.
func (s *Service) liveHere(sb *sandbox.Sandbox, at string) bool {
	if !s.views.Changes(sb.ID, sb.Spec.LiveViews, sb.Spec.BoundViews, at) {
		return false
	}
	return peers.Live(at) || sb.State != sandbox.StatePaused
}

// bound says whether sb's view at at is bound onto its mount point by
// den-init (peers.Views.Binds).
func bound(at string) bool { return !peers.Live(at) }

// bind has den-init in running sb bind view p onto its mount point again,
// when it is bound: after its view in the views directory changed.
func (s *Service) bind(ctx context.Context, sb *sandbox.Sandbox, p peers.Peer) error {
	if !bound(p.At) {
		return nil
	}
	return s.sandboxes.BindViewsLocked(ctx, sb, []sandbox.ViewMount{{Source: peers.Inside(p.At), Destination: p.At}})
}

// source is the host path view p shows.
func (s *Service) source(p peers.Peer) string {
	return s.views.Source(p, s.volumes.Path((&sandbox.Sandbox{ID: p.SandboxID}).VolumeKey()))
}

// checkChange refuses, before anything is done, a change to sb's view at
// at its state does not allow.
func (s *Service) checkChange(sb *sandbox.Sandbox, restart bool, at, action string) error {
	if err := s.sandboxes.Elsewhere(sb); err != nil {
		return err
	}
	switch sb.State {
	case sandbox.StateStopped:
		return nil
	case sandbox.StateRunning, sandbox.StatePaused:
		if restart || s.liveHere(sb, at) {
			return nil
		}
		hint := "pass --restart to restart it now (its processes end, its files stay), or stop it first with `den stop " + sb.Name + "`"
		if s.views.Changes(sb.ID, sb.Spec.LiveViews, sb.Spec.BoundViews, at) {
			return errdefs.WithHint(errdefs.Conflict("cannot %s sandbox %q while it is paused, but by a restart: den-init mounts the view at %s, and it is frozen", action, sb.Name, at),
				"resume it first with `den resume "+sb.Name+"`, or use --at "+peers.Root+"/NAME, which changes while it is paused; else "+hint)
		}
		if s.views.BootDir(sb.ID, sb.Spec.LiveViews) != "" {
			hint = "views under " + peers.Root + " change while it runs: use --at " + peers.Root + "/NAME; else " + hint
		}
		return errdefs.WithHint(errdefs.Conflict("cannot %s sandbox %q while it is %s: a view at %s is mounted when it boots", action, sb.Name, sb.State, at), hint)
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
		if peer.Live {
			return sandbox.Require(other, "view live", sandbox.StateRunning, sandbox.StatePaused, sandbox.StateHibernated, sandbox.StateStopped, sandbox.StateError)
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

// changePeers applies change to sandbox id's view at at under its lock:
// a stopped sandbox's record only; a running or paused one's by stopping
// it, recording the change and booting it again when restart asks; else
// live, by place, which changes the view in the sandbox's views
// directory and returns how to undo that if the record cannot be
// written. change returns the view it let go, which is removed once the
// new record is written.
func (s *Service) changePeers(ctx context.Context, id string, restart bool, at, msg string, change func(*sandbox.Sandbox) (string, error), place func(*sandbox.Sandbox) (func(), error)) (*sandbox.Sandbox, error) {
	var changed *sandbox.Sandbox
	err := s.sandboxes.WithSandbox(ctx, id, func(sb *sandbox.Sandbox) error {
		if err := s.checkChange(sb, restart, at, "change the peers of"); err != nil {
			return err
		}
		// Checked before the instance goes: a change that cannot be made
		// leaves the sandbox as it was.
		probe := *sb
		probe.Spec.Peers = slices.Clone(sb.Spec.Peers)
		if _, err := change(&probe); err != nil {
			return err
		}
		running := sb.State != sandbox.StateStopped
		boot := running && (restart || !s.liveHere(sb, at))
		if boot {
			if err := s.sandboxes.StopLocked(ctx, sb, "stopping to change its peers"); err != nil {
				return err
			}
		}
		dropped, err := change(sb)
		if err != nil {
			return err
		}
		undo := func() {}
		if running && !boot {
			if undo, err = place(sb); err != nil {
				undo()
				return err
			}
		}
		if err := s.sandboxes.Record(ctx, sb, sandbox.EventPeers, msg); err != nil {
			undo()
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
