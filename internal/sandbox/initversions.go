package sandbox

import (
	"context"
	"fmt"
)

// InitVersions returns the versions of den-init something here still
// needs: the one each live sandbox's instance runs, and the one each
// memory image was taken with. Others may go.
func (s *Service) InitVersions(ctx context.Context) (map[string]bool, error) {
	used := map[string]bool{s.cfg.Init: true}
	sbs, err := s.LocalSandboxes(ctx)
	if err != nil {
		return nil, err
	}
	for _, sb := range sbs {
		used[sb.Init] = true
	}
	cks, err := s.cfg.Store.ListCheckpointsOn(ctx, s.cfg.Node)
	if err != nil {
		return nil, err
	}
	for _, ck := range cks {
		if ck.Memory {
			used[ck.Manifest.Init] = true
		}
	}
	return used, nil
}

// Unwakeable names the hibernated sandboxes of this node whose memory
// image this host cannot restore, each with why: after an upgrade that
// brought another runsc, for one. Each would go to error when woken; its
// files stay, and `den recover NAME --cold` boots them. Only manifests
// are read: nothing changes.
func (s *Service) Unwakeable(ctx context.Context) (map[string]error, error) {
	sbs, err := s.LocalSandboxes(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]error{}
	for _, sb := range sbs {
		if sb.State != StateHibernated || sb.Checkpoint == "" {
			continue
		}
		ck, err := s.cfg.Store.GetCheckpoint(ctx, sb.ID, sb.Checkpoint)
		if err != nil {
			return nil, fmt.Errorf("finding the checkpoint sandbox %q sleeps in: %w", sb.Name, err)
		}
		if err := s.Restorable(ck, sb); err != nil {
			out[sb.Name] = err
		}
	}
	return out, nil
}
