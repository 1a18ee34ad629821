package sandbox

import (
	"context"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/peers"
)

// Peering (package peers): a sandbox sees a read-only view of another
// sandbox's files. The verbs that change a sandbox's peers are
// internal/peering's, above the core; the core keeps what create, fork
// and boot need: the views an instance mounts and those a fork gets.

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
