package btrfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// mountLoop mounts the btrfs filesystem in file at dir through a loop
// device, and returns the device. A device already backed by file is
// reused; otherwise a new one is set up to detach itself when the
// filesystem is unmounted, so an unmount leaves nothing behind.
func mountLoop(file, dir string) (string, error) {
	devs, err := LoopDevices(file)
	if err != nil {
		return "", err
	}
	if len(devs) > 0 {
		if err := mount(devs[0], dir); err != nil {
			return "", err
		}
		return devs[0], nil
	}
	loop, dev, err := attachLoop(file)
	if err != nil {
		return "", err
	}
	// Until the mount holds the device, this is its only user: closing it
	// on failure detaches it.
	defer loop.Close()
	if err := mount(dev, dir); err != nil {
		return "", err
	}
	return dev, nil
}

func mount(dev, dir string) error {
	if err := unix.Mount(dev, dir, "btrfs", unix.MS_NOATIME, ""); err != nil {
		return fmt.Errorf("mounting the storage pool: %w", err)
	}
	return nil
}

// attachLoop sets up a free loop device backed by file and returns it open.
func attachLoop(file string) (*os.File, string, error) {
	backing, err := os.OpenFile(file, os.O_RDWR, 0)
	if err != nil {
		return nil, "", fmt.Errorf("opening loop file: %w", err)
	}
	defer backing.Close()
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR, 0)
	if err != nil {
		return nil, "", fmt.Errorf("setting up a loop device: %w", err)
	}
	defer ctl.Close()
	// Another process may take the free device between our asking and
	// our configuring it; then ask again.
	for range 16 {
		n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
		if err != nil {
			return nil, "", fmt.Errorf("finding a free loop device: %w", err)
		}
		dev := fmt.Sprintf("/dev/loop%d", n)
		loop, err := os.OpenFile(dev, os.O_RDWR, 0)
		if err != nil {
			return nil, "", fmt.Errorf("setting up a loop device: %w", err)
		}
		err = configureLoop(loop, backing, file)
		if err == nil {
			return loop, dev, nil
		}
		loop.Close()
		if !errors.Is(err, unix.EBUSY) {
			return nil, "", fmt.Errorf("setting up loop device %s: %w", dev, err)
		}
	}
	return nil, "", errors.New("setting up a loop device: every free device was taken before we could use it")
}

// configureLoop backs loop with the backing file, with direct I/O (no
// second copy of every page in the host's cache) where the filesystem
// under the file allows it.
func configureLoop(loop, backing *os.File, name string) error {
	cfg := unix.LoopConfig{Fd: uint32(backing.Fd())}
	cfg.Info.Flags = unix.LO_FLAGS_AUTOCLEAR | unix.LO_FLAGS_DIRECT_IO
	copy(cfg.Info.File_name[:len(cfg.Info.File_name)-1], name)
	err := unix.IoctlLoopConfigure(int(loop.Fd()), &cfg)
	if errors.Is(err, unix.EINVAL) {
		cfg.Info.Flags &^= unix.LO_FLAGS_DIRECT_IO
		err = unix.IoctlLoopConfigure(int(loop.Fd()), &cfg)
	}
	return err
}

// LoopDevices returns the loop devices backed by file, such as
// "/dev/loop3".
func LoopDevices(file string) ([]string, error) {
	abs, err := filepath.Abs(file)
	if err != nil {
		return nil, err
	}
	if resolved, err := filepath.EvalSymlinks(abs); err == nil {
		abs = resolved
	}
	paths, err := filepath.Glob("/sys/block/loop*/loop/backing_file")
	if err != nil {
		return nil, err
	}
	var devs []string
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if errors.Is(err, os.ErrNotExist) {
			continue // detached meanwhile
		}
		if err != nil {
			return nil, err
		}
		if strings.TrimSuffix(string(b), "\n") == abs {
			devs = append(devs, "/dev/"+filepath.Base(filepath.Dir(filepath.Dir(p))))
		}
	}
	return devs, nil
}
