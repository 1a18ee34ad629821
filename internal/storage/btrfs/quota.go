package btrfs

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/storage"
)

// Size caps are btrfs quota groups. Quotas stay off until the first cap
// is set; turning them on covers the whole filesystem the pool is on.
// They come in two modes, which count differently:
//
//   - Simple quotas (QuotasSimple, Linux 6.7 and later) charge each
//     extent to the subvolume that wrote it. They cost next to nothing,
//     but a new snapshot starts at zero, so den groups every volume ever
//     made at one key (a sandbox and each copy resumed from its
//     checkpoints) in one level-1 quota group, named after the key, and
//     caps the group. What counts is what the sandbox itself wrote and
//     is still held somewhere: its image, and a fork's parent data, do
//     not count; a file it deleted still counts while a checkpoint holds
//     it. This is how a container's writable layer is usually limited.
//   - Full quotas (QuotasFull) count each subvolume's "referenced" bytes:
//     everything its files and trees use, shared with the image or not.
//     A snapshot inherits its parent's cap, so a resumed sandbox keeps it.
//     The price is paid at every commit: here, a sync after rewriting
//     1,000 files of a 20,000-file image took 0.7 s instead of 0.07 s,
//     which a checkpoint waits for.
//
// A write past a cap fails with EDQUOT, in the capped volume only.

// Log keys.
const (
	logKeyMode  = "mode"
	logKeyError = "err"
)

// QuotaMode selects how caps are counted; see above.
type QuotaMode string

// Quota modes.
const (
	QuotasAuto   QuotaMode = ""       // simple where the kernel has them, else full
	QuotasSimple QuotaMode = "simple" // per-key groups of simple quotas
	QuotasFull   QuotaMode = "full"   // full qgroups, per subvolume
)

// SetLimit caps what volume key may hold at bytes; 0 lifts the cap. The
// first cap on a pool turns btrfs quotas on, which waits for what the
// filesystem holds to be counted once. The cap stays with the key: a
// volume made again at key from a snapshot of the capped one (a sandbox
// resumed from its checkpoint) is under it, and what the earlier volume
// wrote still counts.
func (d *Driver) SetLimit(ctx context.Context, key string, bytes int64) error {
	if err := storage.ValidateKey(key); err != nil {
		return err
	}
	if bytes < 0 {
		return errdefs.Invalid("invalid size limit %d", bytes)
	}
	info, err := d.tree.Volume(key)
	if err != nil {
		return fmt.Errorf("limiting %q: %w", key, err)
	}
	id, err := subvolID(info.Path)
	if err != nil {
		return fmt.Errorf("limiting %q: %w", key, classify(err, key))
	}
	mode, err := d.quotaMode()
	if err == nil && mode == "" && bytes > 0 {
		mode, err = d.enableQuotas()
	}
	if err != nil {
		return fmt.Errorf("limiting %q: %w", key, err)
	}
	if mode == "" {
		return nil // no quotas, no cap to lift
	}
	// Every change is made through the pool's directory, never the
	// volume: a transaction is charged to the subvolume its ioctl is made
	// in, and a volume over its cap could not take even that.
	root, err := openDir(d.tree.Root)
	if err != nil {
		return fmt.Errorf("limiting %q: %w", key, err)
	}
	defer root.Close()
	capped := id
	if mode == QuotasSimple {
		capped = groupOf(key)
		if err := qgroupCreate(root, capped); err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("limiting %q: creating its quota group: %w", key, err)
		}
		if err := qgroupAssign(root, id, capped); err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("limiting %q: joining its quota group: %w", key, err)
		}
		if err := d.underReserve(root, key, capped); err != nil {
			return fmt.Errorf("limiting %q: %w", key, err)
		}
	}
	if err := qgroupLimit(root, capped, bytes); err != nil {
		return fmt.Errorf("limiting %q: %w", key, err)
	}
	return nil
}

// Quota reports what volume key holds and its cap, counted as the pool's
// quota mode counts (see above; as of btrfs's last commit, at most 30 s
// old). Without quotas, Used is the apparent size of its files, as Usage
// counts it, and there is no cap.
func (d *Driver) Quota(ctx context.Context, key string) (storage.Quota, error) {
	if err := storage.ValidateKey(key); err != nil {
		return storage.Quota{}, err
	}
	info, err := d.tree.Volume(key)
	if err != nil {
		return storage.Quota{}, fmt.Errorf("reading the quota of %q: %w", key, err)
	}
	mode, err := d.quotaMode()
	if err != nil {
		return storage.Quota{}, fmt.Errorf("reading the quota of %q: %w", key, err)
	}
	if mode == "" {
		used, err := d.tree.Usage(ctx, key)
		return storage.Quota{Used: used}, err
	}
	id, err := subvolID(info.Path)
	if err != nil {
		return storage.Quota{}, fmt.Errorf("reading the quota of %q: %w", key, classify(err, key))
	}
	if mode == QuotasSimple {
		if _, err := os.Stat(d.qgroupDir(groupOf(key))); err == nil {
			id = groupOf(key)
		}
	}
	q, err := d.readQgroup(id)
	if err != nil {
		return storage.Quota{}, fmt.Errorf("reading the quota of %q: %w", key, err)
	}
	if mode == QuotasFull {
		d.rescanIfInconsistent()
	}
	return q, nil
}

// Recount brings what Quota reports up to date: btrfs counts quota
// groups when it commits a transaction (every 30 s unless asked), so a
// volume made or written since the last commit reads low, or zero, until
// then. It commits now (syncfs on the pool), which costs as much as the
// commit btrfs would have made a little later. Without quotas there is
// nothing to bring up to date.
func (d *Driver) Recount(ctx context.Context) error {
	mode, err := d.quotaMode()
	if err != nil || mode == "" {
		return err
	}
	root, err := openDir(d.tree.Root)
	if err != nil {
		return fmt.Errorf("recounting quotas: %w", err)
	}
	defer root.Close()
	if err := unix.Syncfs(int(root.Fd())); err != nil {
		return fmt.Errorf("recounting quotas: syncing the pool: %w", err)
	}
	return nil
}

// readQgroup reads quota group id's count and cap from sysfs.
func (d *Driver) readQgroup(id uint64) (storage.Quota, error) {
	dir := d.qgroupDir(id)
	var used, flags, limit uint64
	used, err := readInt(filepath.Join(dir, "referenced"))
	if err == nil {
		flags, err = readInt(filepath.Join(dir, "limit_flags"))
	}
	if err == nil && flags&limitMaxRfer != 0 {
		limit, err = readInt(filepath.Join(dir, "max_referenced"))
	}
	if err != nil {
		return storage.Quota{}, err
	}
	return storage.Quota{Used: int64(used), Limit: int64(limit)}, nil
}

// groupOf is the level-1 quota group of key: a hash of it, so that every
// volume made at key finds the same group without a record kept anywhere.
func groupOf(key string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(key))
	return 1<<qgroupLevelShift | h.Sum64()&(1<<qgroupLevelShift-1)
}

// qgroupDir is where sysfs shows quota group id: "<level>_<id>".
func (d *Driver) qgroupDir(id uint64) string {
	name := fmt.Sprintf("%d_%d", id>>qgroupLevelShift, id&(1<<qgroupLevelShift-1))
	return filepath.Join(d.sysfs, "qgroups", name)
}

// quotaMode says how the pool's filesystem counts quotas: "" when they
// are off.
func (d *Driver) quotaMode() (QuotaMode, error) {
	if err := d.findSysfs(); err != nil {
		return "", err
	}
	n, err := readInt(filepath.Join(d.sysfs, "qgroups", "enabled"))
	if errors.Is(err, os.ErrNotExist) || (err == nil && n == 0) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(filepath.Join(d.sysfs, "qgroups", "mode"))
	if err == nil && strings.TrimSpace(string(b)) == "squota" {
		return QuotasSimple, nil
	}
	return QuotasFull, nil // kernels before simple quotas have no mode file
}

// enableQuotas turns quotas on in the configured mode, if they are off,
// and waits for the first count of what every subvolume holds: until it
// ends, caps would be checked against wrong numbers.
func (d *Driver) enableQuotas() (QuotaMode, error) {
	d.quotaMu.Lock()
	defer d.quotaMu.Unlock()
	mode, err := d.quotaMode()
	if err != nil || mode != "" {
		return mode, err
	}
	root, err := openDir(d.tree.Root)
	if err != nil {
		return "", err
	}
	defer root.Close()
	mode = d.quotas
	if mode != QuotasFull {
		err = quotaCtl(root, quotaCtlEnableSimple)
		switch {
		case err == nil:
			mode = QuotasSimple
		case mode == QuotasAuto && (errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EOPNOTSUPP)):
			mode = QuotasFull // a kernel without simple quotas
		default:
			return "", fmt.Errorf("enabling btrfs simple quotas: %w", err)
		}
	}
	if mode == QuotasFull {
		if err := quotaCtl(root, quotaCtlEnable); err != nil {
			return "", fmt.Errorf("enabling btrfs quotas: %w", err)
		}
		if err := ioctl(int(root.Fd()), iocQuotaRescanWait, nil); err != nil {
			return "", fmt.Errorf("waiting for btrfs to count the pool's usage: %w", err)
		}
	}
	d.log.Info("enabled btrfs quotas on the storage pool's filesystem", logKeyDir, d.tree.Root, logKeyMode, string(mode))
	return mode, nil
}

// rescanIfInconsistent starts a recount when btrfs says its full quota
// counts are off, as it does after dropping a large shared subtree (see
// the filesystem's qgroups/drop_subtree_threshold). It does not wait.
func (d *Driver) rescanIfInconsistent() {
	n, err := readInt(filepath.Join(d.sysfs, "qgroups", "inconsistent"))
	if err != nil || n == 0 {
		return
	}
	root, err := openDir(d.tree.Root)
	if err != nil {
		return
	}
	defer root.Close()
	if err := quotaRescan(root); err != nil && !errors.Is(err, unix.EINPROGRESS) {
		d.log.Warn("btrfs quota counts are inconsistent and a rescan failed", logKeyDir, d.tree.Root, logKeyError, err)
		return
	}
	d.log.Info("btrfs quota counts were inconsistent: rescanning", logKeyDir, d.tree.Root)
}

// findSysfs finds the filesystem's directory under /sys/fs/btrfs, named
// by its fsid.
func (d *Driver) findSysfs() error {
	d.sysfsMu.Lock()
	defer d.sysfsMu.Unlock()
	if d.sysfs != "" {
		return nil
	}
	root, err := openDir(d.tree.Root)
	if err != nil {
		return err
	}
	defer root.Close()
	u, err := fsid(root)
	if err != nil {
		return fmt.Errorf("reading the pool filesystem's id: %w", err)
	}
	dir := fmt.Sprintf("/sys/fs/btrfs/%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
	if _, err := os.Stat(dir); err != nil {
		return fmt.Errorf("finding the pool filesystem in sysfs: %w", err)
	}
	d.sysfs = dir
	return nil
}

func readInt(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
}

// joinGroupOf puts the new volume at path into key's quota group, if the
// key has one: a sandbox resumed from a checkpoint stays under its cap.
// Only simple quotas need it; full quotas copy the parent's cap.
func (d *Driver) joinGroupOf(key, path string) error {
	if mode, err := d.quotaMode(); err != nil || mode != QuotasSimple {
		return err
	}
	group := groupOf(key)
	if _, err := os.Stat(d.qgroupDir(group)); err != nil {
		return nil // never capped
	}
	id, err := subvolID(path)
	if err != nil {
		return err
	}
	root, err := openDir(d.tree.Root)
	if err != nil {
		return err
	}
	defer root.Close()
	if err := qgroupAssign(root, id, group); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("joining the quota group of %q: %w", key, err)
	}
	return nil
}
