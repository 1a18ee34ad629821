package sandbox

import "context"

// InitVersions returns the versions of den-init something here still
// needs: the one each live sandbox's instance runs, and the one each
// memory image was taken with. Others may go.
func (s *Service) InitVersions(ctx context.Context) (map[string]bool, error) {
	used := map[string]bool{s.cfg.Init: true}
	sbs, err := s.localSandboxes(ctx)
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
