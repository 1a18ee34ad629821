package image

import (
	"context"
	"errors"
	"fmt"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/sandbox"
	"github.com/den-dev/den/internal/specs"
)

// Versions. Every build, import or pull of a name makes its next version
// in a volume of its own (sandbox.ImageVolumeKey); the record of the
// newest is the image's, the others are kept as older versions. An older
// version stays while a sandbox or a checkpoint was made from it, so
// `den rebase --image NAME@N` can go back to it; the others go once a
// newer version is recorded.

// Version returns version of image name, 0 meaning the newest (built
// first if it is a built-in image never built). Its files must be here.
func (m *Manager) Version(ctx context.Context, name string, version int) (*sandbox.Image, error) {
	if version == 0 {
		return m.Ensure(ctx, name)
	}
	if err := specs.ValidateName("image", name); err != nil {
		return nil, err
	}
	im, err := m.cfg.Records.GetImageVersion(ctx, name, version)
	if errors.Is(err, errdefs.ErrNotFound) {
		return nil, versionNotFound(name, version)
	}
	if err != nil {
		return nil, fmt.Errorf("looking up image %q version %d: %w", name, version, err)
	}
	if !m.here(im) {
		return nil, errdefs.WithHint(errdefs.NotFound("version %d of image %q is not on this node", version, name),
			"use a version this node has (`den image ls`), or the newest")
	}
	return im, nil
}

func versionNotFound(name string, version int) error {
	return errdefs.WithHint(errdefs.NotFound("image %q has no version %d", name, version),
		"list the versions with `den image ls`; leave @VERSION out for the newest")
}

// Versions returns the older versions of image name kept, oldest first;
// of every image when name is "".
func (m *Manager) Versions(ctx context.Context, name string) ([]*sandbox.Image, error) {
	ims, err := m.cfg.Records.ListImageVersions(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("listing image versions: %w", err)
	}
	return ims, nil
}

// nextVersion is the version the next install of name makes: one past
// every version recorded.
func (m *Manager) nextVersion(ctx context.Context, name string) (int, error) {
	next := 1
	im, err := m.cfg.Records.GetImage(ctx, name)
	switch {
	case err == nil:
		next = im.Version + 1
	case !errors.Is(err, errdefs.ErrNotFound):
		return 0, fmt.Errorf("looking up image %q: %w", name, err)
	}
	older, err := m.cfg.Records.ListImageVersions(ctx, name)
	if err != nil {
		return 0, fmt.Errorf("listing versions of image %q: %w", name, err)
	}
	for _, o := range older {
		next = max(next, o.Version+1)
	}
	return next, nil
}

// inUse returns the versions of image name that sandboxes (not destroyed)
// or checkpoints were made from.
func (m *Manager) inUse(ctx context.Context, name string) (map[int]bool, error) {
	used := map[int]bool{}
	sbs, err := m.cfg.Records.ListSandboxes(ctx)
	if err != nil {
		return nil, err
	}
	for _, sb := range sbs {
		if sb.Spec.Image == name {
			used[sb.Spec.ImageVersionOrFirst()] = true
		}
	}
	cks, err := m.cfg.Records.ListCheckpoints(ctx, "")
	if err != nil {
		return nil, err
	}
	for _, ck := range cks {
		if ck.Manifest.Spec.Image == name {
			used[ck.Manifest.Spec.ImageVersionOrFirst()] = true
		}
	}
	return used, nil
}

// prune removes the older versions of name that nothing uses, record
// first. Failures are logged: the new version is made either way. The
// caller holds the name's lock.
func (m *Manager) prune(ctx context.Context, name string) {
	older, err := m.cfg.Records.ListImageVersions(ctx, name)
	if err != nil || len(older) == 0 {
		if err != nil {
			m.log.Error("listing older image versions", logImage, name, logError, err)
		}
		return
	}
	used, err := m.inUse(ctx, name)
	if err != nil {
		m.log.Error("finding which image versions are used", logImage, name, logError, err)
		return
	}
	for _, o := range older {
		if used[o.Version] {
			continue
		}
		if err := m.removeVersion(ctx, o); err != nil {
			m.log.Error("removing an unused image version", logImage, name, logVersion, o.Version, logError, err)
		}
	}
}

// removeVersion removes an older version: its record, then its volume.
func (m *Manager) removeVersion(ctx context.Context, im *sandbox.Image) error {
	if err := m.cfg.Records.DeleteImageVersion(ctx, im.Name, im.Version); err != nil {
		return err
	}
	if err := m.cfg.Pool.Remove(ctx, im.VolumeKey()); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		return fmt.Errorf("removing volume of image %q version %d: %w", im.Name, im.Version, err)
	}
	m.log.Info("image version removed", logImage, im.Name, logVersion, im.Version)
	return nil
}

// Remove deletes image ref: NAME removes every version of it, records
// then volumes; NAME@N one older version. Sandboxes made from them keep
// their own copies. ErrNotFound when there is no such image or version.
func (m *Manager) Remove(ctx context.Context, ref string) error {
	name, version, err := sandbox.ParseImageRef(ref)
	if err != nil {
		return err
	}
	unlock, err := m.locks.lock(ctx, name)
	if err != nil {
		return err
	}
	defer unlock()
	cur, err := m.cfg.Records.GetImage(ctx, name)
	if err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		return fmt.Errorf("looking up image %q: %w", name, err)
	}
	if version != 0 {
		if cur != nil && cur.Version == version {
			return errdefs.WithHint(errdefs.Conflict("version %d is the newest of image %q", version, name),
				fmt.Sprintf("remove the whole image with `den image rm %s`, or make a newer version first", name))
		}
		im, err := m.cfg.Records.GetImageVersion(ctx, name, version)
		if errors.Is(err, errdefs.ErrNotFound) {
			return versionNotFound(name, version)
		}
		if err != nil {
			return err
		}
		return m.removeVersion(ctx, im)
	}
	older, err := m.cfg.Records.ListImageVersions(ctx, name)
	if err != nil {
		return fmt.Errorf("listing versions of image %q: %w", name, err)
	}
	if cur != nil {
		if err := m.cfg.Records.DeleteImage(ctx, name); err != nil {
			return fmt.Errorf("deleting image record %q: %w", name, err)
		}
	}
	// Version 1's volume is where an image's volume was before versions
	// were kept, and where a crash before the record leaves one.
	keys := []string{volumeKey(name, 1)}
	for _, im := range append(older, cur) {
		if im != nil && im.Version > 1 {
			keys = append(keys, im.VolumeKey())
		}
	}
	removed := false
	for _, key := range keys {
		err := m.cfg.Pool.Remove(ctx, key)
		if errors.Is(err, errdefs.ErrNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("removing image volume %q: %w", name, err)
		}
		removed = true
	}
	if cur == nil && !removed {
		return notFound(name)
	}
	m.log.Info("image removed", logImage, name)
	return nil
}
