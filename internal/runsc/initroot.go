package runsc

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// den-init reaches an instance in one of two ways, told by its version's
// name. Versions named v-… (and the legacy "") are mounted read-only from
// the host at /.den, with den's resolv.conf mounted beside them. A host
// mount in the spec costs every restore 10–15 ms inside runsc, before the
// restored sandbox runs (runsc release-20260905: restore + exec of a busybox
// container, with and without one bind mount), so versions
// named r-… are placed in the instance's root filesystem instead: dend
// copies the binary to /.den/den-init before a fresh boot, and den-init
// writes /etc/resolv.conf itself (guest.Limits.ResolvConf). A memory
// image's den-init then travels in its checkpoint's files, and its spec
// keeps the mounts it was taken with: an image from before restores with
// its v- version as it always did.

// inRoot reports whether instances running that den-init version carry it
// in their root filesystem rather than mounted from the host.
func inRoot(version string) bool { return strings.HasPrefix(version, rootPrefix) }

const (
	rootPrefix  = "r-" // versions placed in the root filesystem
	mountPrefix = "v-" // versions mounted from the host
)

// initDirName is /.den, where den-init lives inside an instance.
var initDirName = strings.TrimPrefix(filepath.Dir(InitPath), "/")

// placeInit makes rootfs/.den/den-init a copy of that version's binary
// before a fresh boot of rootfs. The root is the sandbox's to write, so
// nothing in it is followed: a /.den that is not a directory is replaced
// by one, and the binary goes in under a temporary name and is renamed
// over what was there. The copy shares its data with the binary where
// the file system can (a reflink of a copy kept beside the roots), and
// keeps its modification time, so every copy of one version looks the
// same to the engine.
func (r *Runtime) placeInit(rootfs, version string) error {
	src, err := r.initSource(filepath.Dir(rootfs), version)
	if err != nil {
		return err
	}
	defer src.Close()
	root, err := unix.Open(rootfs, unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("placing den-init: opening the root filesystem: %w", err)
	}
	defer unix.Close(root)
	dir, err := openInitDir(root)
	if err != nil {
		return fmt.Errorf("placing den-init: %w", err)
	}
	defer unix.Close(dir)
	name := filepath.Base(InitPath)
	tmp := "." + name + ".new"
	if err := unix.Unlinkat(dir, tmp, 0); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("placing den-init: clearing %s: %w", tmp, err)
	}
	fd, err := unix.Openat(dir, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o755)
	if err != nil {
		return fmt.Errorf("placing den-init: %w", err)
	}
	dst := os.NewFile(uintptr(fd), tmp)
	err = cloneOrCopy(dst, src)
	if err == nil {
		err = fixAttrs(dst, src)
	}
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = unix.Renameat(dir, tmp, dir, name)
	}
	if err != nil {
		unix.Unlinkat(dir, tmp, 0)
		return fmt.Errorf("placing den-init in /%s: %w", initDirName, err)
	}
	return nil
}

// openInitDir opens /.den under the root directory fd root, making it a
// plain directory first when it is missing or anything else.
func openInitDir(root int) (int, error) {
	for try := 0; ; try++ {
		fd, err := unix.Openat(root, initDirName, unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err == nil || try == 2 {
			return fd, err
		}
		switch {
		case errors.Is(err, unix.ENOENT):
		case errors.Is(err, unix.ELOOP), errors.Is(err, unix.ENOTDIR):
			// A symlink or a file the sandbox made: it goes.
			if err := unix.Unlinkat(root, initDirName, 0); err != nil && !errors.Is(err, unix.ENOENT) {
				return -1, fmt.Errorf("replacing /%s: %w", initDirName, err)
			}
		default:
			return -1, fmt.Errorf("opening /%s: %w", initDirName, err)
		}
		if err := unix.Mkdirat(root, initDirName, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
			return -1, fmt.Errorf("making /%s: %w", initDirName, err)
		}
	}
}

// initSource opens the copy of version's binary that placeInit clones
// from: one kept in dir (where the roots live), made from the installed
// binary the first time, so that cloning it shares data on btrfs, whose
// pool is another file system than the data directory. Copies of other
// versions there go: only fresh boots place den-init, and they all run
// the current one.
func (r *Runtime) initSource(dir, version string) (*os.File, error) {
	if !r.installed(version) {
		return nil, fmt.Errorf("placing den-init: version %s is not installed on this host", version)
	}
	kept := filepath.Join(dir, ".den-init-"+version)
	if f, err := os.Open(kept); err == nil {
		return f, nil
	}
	installed, err := os.Open(filepath.Join(r.initDir(version), filepath.Base(InitPath)))
	if err != nil {
		return nil, fmt.Errorf("placing den-init: %w", err)
	}
	defer installed.Close()
	if err := copyInit(installed, kept); err != nil {
		return nil, fmt.Errorf("placing den-init: keeping a copy beside the roots: %w", err)
	}
	if old, _ := filepath.Glob(filepath.Join(dir, ".den-init-"+rootPrefix+"*")); len(old) > 0 {
		for _, p := range old {
			if p != kept {
				os.Remove(p)
			}
		}
	}
	return os.Open(kept)
}

// copyInit makes dst a copy of the den-init binary src, whole or not at
// all: written under a temporary name beside it, synced, then renamed.
func copyInit(src *os.File, dst string) error {
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".tmp-"+filepath.Base(dst)+"-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	err = cloneOrCopy(tmp, src)
	if err == nil {
		err = fixAttrs(tmp, src)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), dst)
	}
	return err
}

// cloneOrCopy fills dst with src's bytes: a reflink when the file system
// can share them, else a copy.
func cloneOrCopy(dst, src *os.File) error {
	if err := unix.IoctlFileClone(int(dst.Fd()), int(src.Fd())); err == nil {
		return nil
	}
	if _, err := src.Seek(0, io.SeekStart); err != nil {
		return err
	}
	_, err := io.Copy(dst, src)
	return err
}

// fixAttrs gives dst src's mode and modification time, owned by root.
func fixAttrs(dst, src *os.File) error {
	fi, err := src.Stat()
	if err != nil {
		return err
	}
	if err := dst.Chown(0, 0); err != nil {
		return err
	}
	if err := dst.Chmod(0o755); err != nil {
		return err
	}
	ts := []unix.Timespec{unix.NsecToTimespec(fi.ModTime().UnixNano()), unix.NsecToTimespec(fi.ModTime().UnixNano())}
	return unix.UtimesNanoAt(unix.AT_FDCWD, fmt.Sprintf("/proc/self/fd/%d", dst.Fd()), ts, 0)
}

// initMissing reports whether rootfs lacks a regular /.den/den-init: the
// sandbox removed it. A memory image's den-init maps its binary from
// there, so restore puts it back first.
func initMissing(rootfs string) bool {
	fi, err := os.Lstat(filepath.Join(rootfs, initDirName, filepath.Base(InitPath)))
	if err != nil || !fi.Mode().IsRegular() {
		return true
	}
	// Lstat followed /.den if the sandbox made it a symlink.
	di, err := os.Lstat(filepath.Join(rootfs, initDirName))
	return err != nil || !di.IsDir()
}

// prefetchInit starts reading rootfs's den-init into the host's page
// cache and returns at once. Every root has a copy of its own, a new
// inode whose pages nothing has read: left alone, den-init's first run
// after a boot or restore would fault its code in from the storage pool
// page by page, while dend waits for it to answer. The read ahead runs
// while runsc starts the sandbox. It is a hint: nothing fails without
// it, and nothing the sandbox made at /.den is followed.
func prefetchInit(rootfs string) {
	root, err := unix.Open(rootfs, unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	defer unix.Close(root)
	fd, err := unix.Openat2(root, filepath.Join(initDirName, filepath.Base(InitPath)), &unix.OpenHow{
		// Non-blocking: a FIFO there must not hold dend up.
		Flags:   unix.O_RDONLY | unix.O_NONBLOCK | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS,
	})
	if err != nil {
		return
	}
	defer unix.Close(fd)
	_ = unix.Fadvise(fd, 0, 0, unix.FADV_WILLNEED)
}
