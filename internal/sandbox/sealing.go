package sandbox

import (
	"context"
	"sort"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/grant"
)

// SecretsEver says whether a sandbox with this spec was ever granted a
// secret: its memory images are then sealed.
func (sp *Spec) SecretsEver() bool { return sp.SecretsGranted || len(sp.Secrets) > 0 }

// sealsMemory says whether sb's memory images are sealed.
func (s *Service) sealsMemory(sb *Sandbox) bool {
	return s.cfg.Sealer != nil && sb.Spec.SecretsEver()
}

// checkpointSealed saves sb's memory through a scratch directory in memory
// and seals it into dir, recording the key in ck's manifest.
func (s *Service) checkpointSealed(ctx context.Context, sb *Sandbox, ck *Checkpoint, dir string, leaveRunning bool) error {
	keyID, err := grant.Seal(s.cfg.Sealer, "ck-"+ck.ID, dir, imageStateFile, func(plain string) error {
		return s.cfg.Runtime.Checkpoint(ctx, sb.InstanceID(), plain, leaveRunning)
	})
	if err != nil {
		return err
	}
	ck.Manifest.Sealed = keyID
	return nil
}

// openImage returns the directory to restore ck's memory image from, and
// what removes it once the engine has it open: the checkpoint's own
// directory, or, for a sealed image, its plaintext opened into memory.
func (s *Service) openImage(ck *Checkpoint, instance string) (string, func(), error) {
	if ck.Manifest.Sealed == "" {
		return s.memDir(ck.ID), func() {}, nil
	}
	if s.cfg.Sealer == nil {
		return "", nil, errdefs.WithHint(errdefs.Unavailable("memory image of checkpoint %s is sealed, and this dend has no images key", ck.ID), recoverHint)
	}
	plain, err := grant.Open(s.cfg.Sealer, s.memDir(ck.ID), "restore-"+instance, ck.ID, ck.Manifest.Sealed)
	if err != nil {
		return "", nil, err
	}
	return plain, func() {
		if err := s.cfg.Sealer.Remove(plain); err != nil {
			s.log.Error("removing an opened memory image", "checkpoint", ck.ID, "err", err)
		}
	}, nil
}

// sealedWithOurKey refuses a sealed image the sealer's key cannot open.
func (s *Service) sealedWithOurKey(ck *Checkpoint) error {
	if ck.Manifest.Sealed == "" {
		return nil
	}
	have := grant.KeyName(s.cfg.Sealer)
	if have != ck.Manifest.Sealed {
		s.log.Error("a memory image was sealed with another images key", "checkpoint", ck.ID, "sealed_with", ck.Manifest.Sealed, "key_id", have)
		return errdefs.WithHint(errdefs.Unavailable("memory image of checkpoint %s was sealed with images key %s, but dend's images key is %s", ck.ID, ck.Manifest.Sealed, have),
			"give dend the images key file (DATA_DIR/images.key) the image was sealed with; or boot its files alone with `den recover NAME --cold`")
	}
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
	return s.cfg.Sealer.KeyID()
}
