package btrfs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/den-dev/den/internal/storage"
)

// The pool's reserve. Each sandbox's cap bounds what it alone writes; with
// caps overcommitted, sandboxes together could still fill the pool and
// leave den no room for the snapshots of checkpoints and hibernations.
// So, with simple quotas, every sandbox's quota group is a member of one
// level-2 group, sandboxGroup, capped at the pool's size less the
// reserve: once sandboxes together hold that much, their writes fail with
// EDQUOT inside, and the rest of the pool is left to den (images, the
// snapshots of checkpoints, memory images when the data directory is on
// the pool). The kernel checks a write against every group above the
// volume, so this costs nothing more than the caps themselves.
//
// With full quotas den keeps no such group: assigning a volume that shares
// its image's extents makes btrfs's counts inconsistent until a rescan of
// the whole pool. There, admission and the refusals of a full pool are
// the only guard.

// sandboxGroup is the level-2 quota group over every sandbox's volumes.
const sandboxGroup uint64 = 2<<qgroupLevelShift | 1

// sandboxPrefix is the first segment of the keys of sandboxes' volumes.
const sandboxPrefix = "sandboxes/"

// PoolUsage is how full the pool's filesystem is.
func (d *Driver) PoolUsage(ctx context.Context) (storage.PoolUsage, error) {
	u, err := storage.StatPool(d.tree.Root)
	if err != nil {
		return u, err
	}
	u.Caps = true
	return u, nil
}

// underReserve puts quota group capped, that of sandbox volume key, into
// sandboxGroup, making and sizing that group the first time. root is the
// pool's directory; only simple quotas call it.
func (d *Driver) underReserve(root *os.File, key string, capped uint64) error {
	if d.reserve == 0 || !strings.HasPrefix(key, sandboxPrefix) {
		return nil
	}
	if err := d.sizeSandboxGroup(root); err != nil {
		return err
	}
	if err := qgroupAssign(root, capped, sandboxGroup); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("putting it under the pool's reserve: %w", err)
	}
	return nil
}

// sizeSandboxGroup makes sandboxGroup if it is missing and caps it at the
// pool's size less the reserve, once per Driver: the reserve may have
// changed since an earlier dend set it.
func (d *Driver) sizeSandboxGroup(root *os.File) error {
	d.reserveMu.Lock()
	defer d.reserveMu.Unlock()
	if d.reserveSet {
		return nil
	}
	u, err := storage.StatPool(d.tree.Root)
	if err != nil {
		return err
	}
	limit := u.Size - d.reserve
	if limit < 1 {
		limit = 1
	}
	if err := qgroupCreate(root, sandboxGroup); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("creating the quota group over all sandboxes: %w", err)
	}
	if err := qgroupLimit(root, sandboxGroup, limit); err != nil {
		return fmt.Errorf("capping all sandboxes together: %w", err)
	}
	d.reserveSet = true
	d.log.Info("sandboxes together may hold the pool less its reserve", logKeyDir, d.tree.Root, "limit", limit, "reserve", d.reserve)
	return nil
}

// SandboxesQuota is what sandboxes' volumes hold together against the
// pool less its reserve; zero when the pool keeps no such bound.
func (d *Driver) SandboxesQuota() (storage.Quota, error) {
	if mode, err := d.quotaMode(); err != nil || mode != QuotasSimple {
		return storage.Quota{}, err
	}
	if _, err := os.Stat(d.qgroupDir(sandboxGroup)); err != nil {
		return storage.Quota{}, nil
	}
	return d.readQgroup(sandboxGroup)
}
