package peers

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// A sandbox made since views could change live boots with one more
// mount of den's own: its views directory, the host directory
// Dir/<sandbox id>, read-only at Root. Its views are read-only bind
// mounts made on the host inside that directory, at any time: the
// directory tree Dir is a shared mount, so a mount made in it reaches
// the engine's file server (runsc's gofer, whose copy of the tree is a
// slave of it), and the engine serves mounts other than the root with
// shared file access, so the sandbox sees a view appear, change and go
// while its processes run.
//
// A view placed elsewhere than under Root sits in the views directory
// too, hidden under Root/HiddenDir (at Inside), and den-init binds it
// onto its mount point inside the sandbox (Binds): the engine's bind
// keeps the directory it found, so a refresh binds it again. Sandboxes
// made before that (bound false) have such views mounted by the engine
// at boot.
//
// The mounts are host state, not records: they go with a reboot (Dir
// lives under the run directory), and Place makes them again before an
// instance boots, from the views the sandbox's spec lists.

// HiddenDir is the directory of Root where the views placed elsewhere
// than under Root are found, each under a name of its mount point's
// (hidden: no sandbox name starts with a dot).
const HiddenDir = ".den-views"

// Live says whether a view at at sits under Root.
func Live(at string) bool { return strings.HasPrefix(at, Root+"/") }

// Bound are the views of ps placed elsewhere than under Root: those
// den-init binds when the sandbox's spec says so (Binds).
func Bound(ps []Peer) []Peer {
	var out []Peer
	for _, p := range ps {
		if !Live(p.At) {
			out = append(out, p)
		}
	}
	return out
}

// Inside is where, inside the sandbox, den-init finds the view whose
// mount point at is not under Root: a name made of at, the same for
// every view at at, so a memory image restores with the view there now.
func Inside(at string) string { return Root + "/" + HiddenDir + "/" + hiddenName(at) }

// hiddenName is at's name under HiddenDir: a hash, since at may be
// longer than a file name may be.
func hiddenName(at string) string {
	sum := sha256.Sum256([]byte(at))
	return hex.EncodeToString(sum[:12])
}

// Changes says whether sandbox's view at at can change while it runs:
// it boots with its views directory, and the view is in it.
func (v *Views) Changes(sandbox string, live, bound bool, at string) bool {
	return v.BootDir(sandbox, live) != "" && (bound || Live(at))
}

// SetUp makes dir, where sandboxes' views directories are, a shared
// mount of its own, so that mounts made in it propagate to the engines'
// copies of it. Called once when dend starts; a dir that is one already
// stays.
func SetUp(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("making the views directory: %w", err)
	}
	if !isMountPoint(dir) {
		if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("binding the views directory %s: %w", dir, err)
		}
	}
	if err := unix.Mount("", dir, "", unix.MS_SHARED, ""); err != nil {
		return fmt.Errorf("sharing the views directory %s: %w", dir, err)
	}
	return nil
}

// LetGo undoes SetUp when dend stops with no sandbox's views directory
// left in dir, so that a clean stop leaves no mount behind. While one is
// left the mount stays: that sandbox's engine sees its views through it,
// and the next dend places them there again.
func LetGo(dir string) error {
	if dir == "" {
		return nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("reading the views directory: %w", err)
	}
	if len(entries) > 0 || len(mountsUnder(dir)) != 1 || !isMountPoint(dir) {
		return nil
	}
	if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
		return fmt.Errorf("unmounting the views directory %s: %w", dir, err)
	}
	return nil
}

// Dir is the host directory sandbox's views appear in; "" when views
// cannot change live on this host.
func (v *Views) Dir(sandbox string) string {
	if v.dir == "" {
		return ""
	}
	return filepath.Join(v.dir, sandbox)
}

// BootDir is the views directory sandbox's instances mount at Root: ""
// when they boot without one, because live is false (the sandbox was
// made before views could change live) or this host keeps none.
func (v *Views) BootDir(sandbox string, live bool) string {
	if !live {
		return ""
	}
	return v.Dir(sandbox)
}

// Mount is a view an instance mounts read-only when it boots.
type Mount struct {
	Source      string // host path of the view
	Destination string // mount point inside
}

// BootMounts are the views ps of sandbox its instances mount when they
// boot: those its views directory (BootDir) does not hold. other gives
// the root path of a live view's OTHER.
func (v *Views) BootMounts(sandbox string, live, bound bool, ps []Peer, other func(id string) string) []Mount {
	var ms []Mount
	for _, p := range ps {
		if v.Changes(sandbox, live, bound, p.At) {
			continue
		}
		ms = append(ms, Mount{Source: v.Source(p, other(p.SandboxID)), Destination: p.At})
	}
	return ms
}

// Binds are the views ps of sandbox den-init binds onto their mount
// points once an instance booted: those its views directory holds
// elsewhere than under Root (Inside).
func (v *Views) Binds(sandbox string, live, bound bool, ps []Peer) []Mount {
	var ms []Mount
	for _, p := range ps {
		if !Live(p.At) && v.Changes(sandbox, live, bound, p.At) {
			ms = append(ms, Mount{Source: Inside(p.At), Destination: p.At})
		}
	}
	return ms
}

// Source is the host path a view shows: OTHER's root for a live view
// (other is its path), else the view's snapshot.
func (v *Views) Source(p Peer, other string) string {
	if p.Live {
		return other
	}
	return v.vol.Path(p.View)
}

// moveMountBeneath is MOVE_MOUNT_BENEATH (Linux 6.5): move_mount puts
// the new mount under the one at the target, so unmounting the top one
// swaps them in one step.
const moveMountBeneath = 0x200

// Mount places the view p of sandbox, showing source, in the sandbox's
// views directory: a read-only bind mount, no device files, no set-id,
// made read-only before it is attached. A view already there is replaced
// in one step: the new mount goes beneath it, then the old one is
// detached, so a lookup finds one or the other, never an empty mount
// point. Kernels before 6.5 detach the old one first.
func (v *Views) Mount(sandbox string, p Peer, source string) error {
	dst := v.target(sandbox, p.At)
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return fmt.Errorf("making the mount point of the view at %s: %w", p.At, err)
	}
	fd, err := unix.OpenTree(unix.AT_FDCWD, source, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return fmt.Errorf("cloning the view at %s: %w", p.At, err)
	}
	defer unix.Close(fd)
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, &attr); err != nil {
		return fmt.Errorf("making the view at %s read-only: %w", p.At, err)
	}
	if isMountPoint(dst) {
		err := unix.MoveMount(fd, "", unix.AT_FDCWD, dst, unix.MOVE_MOUNT_F_EMPTY_PATH|moveMountBeneath)
		if err == nil {
			if err := unix.Unmount(dst, unix.MNT_DETACH); err != nil { // the old view, now on top
				return fmt.Errorf("detaching the old view at %s: %w", p.At, err)
			}
			return nil
		}
		v.log.Warn("replacing a view in one step failed; detaching the old one first", "dir", dst, "err", err)
		v.unmount(dst)
	}
	if err := unix.MoveMount(fd, "", unix.AT_FDCWD, dst, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("mounting the view at %s: %w", p.At, err)
	}
	return nil
}

// Unmount takes the view at at away from sandbox's views directory. The
// engine may hold files in it open: they stay readable to whoever has
// them, and the view is gone for every new lookup.
func (v *Views) Unmount(sandbox, at string) {
	dst := v.target(sandbox, at)
	v.unmount(dst)
	// Parents made for a deeper mount point stay: they are empty
	// directories in a directory only den writes.
	if err := os.Remove(dst); err != nil && !errors.Is(err, fs.ErrNotExist) {
		v.log.Error("removing a view's mount point", "dir", dst, "err", err)
	}
	if !Live(at) {
		os.Remove(filepath.Dir(dst)) // HiddenDir, once no view is left in it
	}
}

// Place mounts sandbox's views that change live (Changes) in its views
// directory before an instance boots, and takes away what else is
// there; nothing when its instances boot without one (BootDir). other
// gives the root path of a live view's OTHER.
func (v *Views) Place(sandbox string, live, bound bool, ps []Peer, other func(id string) string) error {
	dir := v.BootDir(sandbox, live)
	if dir == "" {
		return nil
	}
	v.Clear(sandbox)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("making the views directory of %s: %w", sandbox, err)
	}
	for _, p := range ps {
		if !v.Changes(sandbox, live, bound, p.At) {
			continue
		}
		if err := v.Mount(sandbox, p, v.Source(p, other(p.SandboxID))); err != nil {
			return err
		}
	}
	return nil
}

// Clear unmounts every view in sandbox's views directory and removes it.
func (v *Views) Clear(sandbox string) {
	dir := v.Dir(sandbox)
	if dir == "" {
		return
	}
	for _, m := range mountsUnder(dir) {
		v.unmount(m)
	}
	if err := os.RemoveAll(dir); err != nil {
		v.log.Error("removing a views directory", "dir", dir, "err", err)
	}
}

// target is where the view at at lives on the host.
func (v *Views) target(sandbox, at string) string {
	if !Live(at) {
		return filepath.Join(v.Dir(sandbox), HiddenDir, hiddenName(at))
	}
	return filepath.Join(v.Dir(sandbox), filepath.FromSlash(strings.TrimPrefix(at, Root+"/")))
}

// unmount detaches every mount at dst (a view replaced by a stacked one
// included); nothing mounted there is no error.
func (v *Views) unmount(dst string) {
	for isMountPoint(dst) {
		if err := unix.Unmount(dst, unix.MNT_DETACH); err != nil {
			v.log.Error("unmounting a view", "dir", dst, "err", err)
			return
		}
	}
}

// isMountPoint says whether a mount sits at path, from /proc/self/mountinfo.
func isMountPoint(path string) bool {
	for _, m := range mountsUnder(path) {
		if m == path {
			return true
		}
	}
	return false
}

// mountsUnder lists the mount points at or under dir, deepest first.
func mountsUnder(dir string) []string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		mp := unescapeMount(f[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	// Deepest first, so a parent is never detached before its children.
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var c int
			if _, err := fmt.Sscanf(s[i+1:i+4], "%03o", &c); err == nil {
				b.WriteByte(byte(c))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
