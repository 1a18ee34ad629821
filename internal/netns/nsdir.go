package netns

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Where namespaces are mounted. A namespace outlives the processes in it
// while its file is bind-mounted, so sandboxes' namespaces outlive dend.
//
// den keeps them in a directory of its own, under its run directory, and
// never in /run/netns, iproute2's: the first `ip netns` add on a host
// bind-mounts /run/netns onto itself, which hides every namespace mounted
// there before, so that they could no longer be unmounted or removed.
// den's directory is a private mount of itself, so that its namespaces'
// mounts propagate to no other mount namespace.
const (
	// DefaultDir is where a dend with the default run directory keeps them.
	DefaultDir = "/run/den/netns"
	// legacyDir is where dends before this one kept them: their
	// sandboxes' namespaces are taken over from there (Open), or removed
	// from there (Detach), even when another tool's mount hides them.
	legacyDir = "/run/netns"
	// namedDir is where AddNamed makes the namespaces of tests and
	// benchmarks: not a mount of its own, as processes of several test
	// binaries share it and none could know when to unmount it.
	namedDir = "/run/den-named-netns"
)

// nsfsMagic is the file system type of a namespace file that is mounted.
const nsfsMagic = 0x6e736673

// Dir is where a dend with run directory runDir keeps its namespaces.
func Dir(runDir string) string { return filepath.Join(runDir, "netns") }

// openDir makes dir a private mount of itself, as iproute2 makes
// /run/netns a shared one: namespaces mounted in it then show in no other
// mount namespace (each such copy would keep its namespace until the file
// goes). A dir that is already a mount (the last dend's, kept for its
// running sandboxes) is made private and kept.
func openDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	err := unix.Mount("", dir, "", unix.MS_PRIVATE, "")
	if err == nil {
		return nil
	}
	if !errors.Is(err, unix.EINVAL) { // EINVAL: not a mount yet
		return fmt.Errorf("making %s a private mount: %w", dir, err)
	}
	if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("mounting %s onto itself: %w", dir, err)
	}
	if err := unix.Mount("", dir, "", unix.MS_PRIVATE, ""); err != nil {
		unix.Unmount(dir, unix.MNT_DETACH)
		return fmt.Errorf("making %s a private mount: %w", dir, err)
	}
	return nil
}

// closeDir unmounts and removes dir once no namespace is left in it.
func closeDir(dir string) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil || len(ents) > 0 {
		return err
	}
	if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("unmounting %s: %w", dir, err)
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing %s: %w", dir, err)
	}
	return nil
}

// newNamedAt creates a network namespace mounted at path without moving
// the calling goroutine's thread into it for longer than the call.
func newNamedAt(path string) (ns netns.NsHandle, err error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		return 0, err
	}
	defer orig.Close()
	ns, err = netns.New()
	if serr := netns.Set(orig); serr != nil {
		// The thread is stuck in the new namespace: never reuse it.
		runtime.LockOSThread()
		if err == nil {
			ns.Close()
		}
		return 0, fmt.Errorf("returning to the host namespace: %w", serr)
	}
	if err != nil {
		return 0, err
	}
	if err := mountNS(fmt.Sprintf("/proc/self/fd/%d", int(ns)), path); err != nil {
		ns.Close()
		return 0, err
	}
	return ns, nil
}

// mountNS bind-mounts the namespace file src at path, a new file.
func mountNS(src, path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_RDONLY, 0o444)
	if err != nil {
		return err
	}
	f.Close()
	if err := unix.Mount(src, path, "", unix.MS_BIND, ""); err != nil {
		os.Remove(path)
		return fmt.Errorf("mounting the namespace at %s: %w", path, err)
	}
	return nil
}

// removeNamed removes the namespace mounted at path: its mounts, then its
// file; what is not there is fine. A dend killed between the two leaves
// the file unmounted, which goes alone. A file that another mount of its
// directory hides (`ip netns` add bind-mounts /run/netns onto itself)
// stays a mount point that no path reaches, and removing it fails with
// EBUSY: it is then removed from a mount namespace of its own.
func removeNamed(path string) error {
	if err := unmountAll(path); err != nil {
		return err
	}
	err := unix.Unlink(path)
	switch {
	case err == nil, errors.Is(err, unix.ENOENT):
		return nil
	case errors.Is(err, unix.EBUSY):
		if err := unlinkHidden(path); err != nil {
			return fmt.Errorf("removing %s, hidden by another mount of %s: %w", path, filepath.Dir(path), err)
		}
		return nil
	default:
		return &os.PathError{Op: "remove", Path: path, Err: err}
	}
}

// unmountAll takes every mount stacked on path off it.
func unmountAll(path string) error {
	for range 64 {
		err := unix.Unmount(path, unix.MNT_DETACH)
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
			return nil // not (or no longer) a mount point
		}
		if err != nil {
			return &os.PathError{Op: "unmount", Path: path, Err: err}
		}
	}
	return fmt.Errorf("unmounting %s: still mounted after 64 unmounts", path)
}

// unlinkHidden removes path, a mount point that another mount of its
// directory hides. The kernel refuses to remove a file that is a mount
// point in the remover's mount namespace, and lets it go (taking its
// mounts off, in every namespace) when it is one only in others'. So a
// thread of dend's gets a private copy of the host's mounts, takes off
// its copy of the mounts on path's directory, and of those on path,
// and removes path. Nothing changes in the host's mounts but that:
// the other tool's mount of the directory stays, with what it holds.
func unlinkHidden(path string) error {
	return onThrownAwayThread(func() error {
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			return fmt.Errorf("making a mount namespace of its own: %w", err)
		}
		// Private first: the copies are peers of shared host mounts,
		// which would take the unmounts below with them.
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			return fmt.Errorf("making its mounts private: %w", err)
		}
		if err := unmountAll(filepath.Dir(path)); err != nil {
			return err
		}
		if err := unmountAll(path); err != nil {
			return err
		}
		if err := unix.Unlink(path); err != nil && !errors.Is(err, unix.ENOENT) {
			return &os.PathError{Op: "remove", Path: path, Err: err}
		}
		return nil
	})
}

// onThrownAwayThread runs fn on a thread of its own that ends with it,
// so that fn may change what only that thread sees (its mount namespace).
// Never the main thread: Go keeps it, and /proc/self is its view.
func onThrownAwayThread(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if unix.Gettid() == unix.Getpid() {
			// Held here, the main thread leaves fn another one.
			errc <- onThrownAwayThread(fn)
			runtime.UnlockOSThread()
			return
		}
		errc <- fn() // never unlocked: the thread ends with this goroutine
	}()
	return <-errc
}

// isNamespace reports whether path is a mounted namespace file.
func isNamespace(path string) bool {
	var st unix.Statfs_t
	return unix.Statfs(path, &st) == nil && st.Type == nsfsMagic
}

// adopt takes the namespaces of this dend's range that an older dend left
// in legacyDir over into m.dir: those of running sandboxes move (a bind
// mount of each, then the old one goes), and those no link leads to any
// more go. A hidden one (another tool's mount of legacyDir hides it) goes
// too: a running sandbox never needs its namespace's file again (a boot
// or restore attaches anew), only its removal. Errors are logged: a
// namespace left behind is removed again with its sandbox.
func (m *Manager) adopt() {
	ents, err := os.ReadDir(legacyDir)
	if err != nil {
		return
	}
	own := nsName(m.tag, "")
	for _, e := range ents {
		name := e.Name()
		id, ok := strings.CutPrefix(name, own)
		if !ok || id == "" {
			continue
		}
		old := filepath.Join(legacyDir, name)
		moved := false
		if _, err := netlink.LinkByName(linkName(m.tag, id)); err == nil && isNamespace(old) {
			if err := removeNamed(m.nsPath(id)); err != nil {
				m.log.Warn("taking over a sandbox's network namespace", "sandbox", id, "err", err)
				continue
			}
			if err := mountNS(old, m.nsPath(id)); err != nil {
				m.log.Warn("taking over a sandbox's network namespace", "sandbox", id, "from", old, "err", err)
				continue
			}
			moved = true
		}
		if err := removeNamed(old); err != nil {
			m.log.Warn("removing a network namespace an older dend left", "path", old, "err", err)
			continue
		}
		if moved {
			m.log.Info("took a sandbox's network namespace over from "+legacyDir, "sandbox", id, "to", m.dir)
		} else {
			m.log.Info("removed a network namespace an older dend left in "+legacyDir, "sandbox", id)
		}
	}
}

// sweep removes the namespaces in m.dir no link leads to any more: a
// running sandbox has its link, so these were left by a removal that
// failed (and whose retry ended with the dend that made it).
func (m *Manager) sweep() {
	ents, err := os.ReadDir(m.dir)
	if err != nil {
		return
	}
	own := nsName(m.tag, "")
	for _, e := range ents {
		id, ok := strings.CutPrefix(e.Name(), own)
		if !ok || id == "" {
			continue
		}
		if _, err := netlink.LinkByName(linkName(m.tag, id)); err == nil {
			continue
		}
		if err := removeNamed(filepath.Join(m.dir, e.Name())); err != nil {
			m.log.Warn("removing a network namespace nothing uses", "sandbox", id, "err", err)
		}
	}
}

// NamedPath is where AddNamed mounts the namespace it makes as name.
func NamedPath(name string) string { return filepath.Join(namedDir, name) }

// AddNamed makes an empty network namespace (loopback only) and returns
// the path it is mounted at (NamedPath): what iproute2's `ip netns` add of NAME makes,
// elsewhere, and without what iproute2 does first, bind-mounting
// /run/netns onto itself, which hides every namespace mounted there
// before. Tests and benchmarks make their namespaces with it; iproute2
// takes the path where it takes a namespace's name (`ip link set X netns
// PATH`), and `nsenter --net=PATH` runs a command in it.
func AddNamed(name string) (string, error) {
	return NamedPath(name), AddAt(NamedPath(name))
}

// AddAt makes an empty network namespace mounted at path, as AddNamed
// does; tests make one where a dend would have (Path) with it.
func AddAt(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("making network namespace %s: %w", path, err)
	}
	ns, err := newNamedAt(path)
	if err != nil {
		return fmt.Errorf("making network namespace %s: %w", path, err)
	}
	ns.Close()
	return nil
}

// DeleteNamed removes the network namespace AddNamed made; one that is
// not there is fine.
func DeleteNamed(name string) error { return DeleteAt(NamedPath(name)) }

// DeleteAt removes the network namespace mounted at path; one that is
// not there is fine.
func DeleteAt(path string) error {
	if err := removeNamed(path); err != nil {
		return fmt.Errorf("removing network namespace %s: %w", path, err)
	}
	return nil
}
