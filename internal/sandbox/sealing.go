package sandbox

import (
	"context"
	"sort"
)

// SecretsEver says whether a sandbox with this spec was ever granted a
// secret: its memory images are then sealed.
func (sp *Spec) SecretsEver() bool { return sp.SecretsGranted || len(sp.Secrets) > 0 }

// sealsMemory says whether sb's memory images are sealed.
func (s *Service) sealsMemory(sb *Sandbox) bool {
	return s.images.Seals() && sb.Spec.SecretsEver()
}

// checkpointSealed saves sb's memory through a scratch directory in memory
// and seals it into ck's image directory, recording the key in ck's
// manifest.
func (s *Service) checkpointSealed(ctx context.Context, sb *Sandbox, ck *Checkpoint, leaveRunning bool) error {
	keyID, err := s.images.SaveSealed(ck.ID, func(plain string) error {
		return s.cfg.Runtime.Checkpoint(ctx, sb.InstanceID(), plain, leaveRunning)
	})
	if err != nil {
		return err
	}
	ck.Manifest.Sealed = keyID
	return nil
}

// SealedKeys returns the ids of the keys the memory images here were
// sealed with, so the sealer refuses to mix in another.
func (s *Service) SealedKeys(ctx context.Context) ([]string, error) {
	cks, err := s.cfg.Store.ListCheckpoints(ctx, "")
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, ck := range cks {
		if ck.Memory && ck.Manifest.Sealed != "" {
			seen[ck.Manifest.Sealed] = true
		}
	}
	ids := make([]string, 0, len(seen))
	for id := range seen {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids, nil
}

// sealedSalvage says with which key a hibernation image dend died after
// sealing was sealed: a sandbox that seals writes its image only sealed.
func (s *Service) sealedSalvage(sb *Sandbox) string {
	if !s.sealsMemory(sb) {
		return ""
	}
	return s.images.KeyID()
}
