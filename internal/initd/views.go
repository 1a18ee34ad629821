package initd

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Peer views placed elsewhere than under the views directory are bound
// onto their mount points from it by den-init, run by the host with
// CAP_SYS_ADMIN (guest.BindViewsArg): the engine fixes its own mounts at
// boot, but the sandbox's kernel makes bind mounts at any time, and keeps
// them across a checkpoint and its restore.

// maxStack bounds the mounts unbind takes off one mount point.
const maxStack = 64

// BindViewsMain binds each view of args, pairs of the view's directory
// and its mount point, and says on w what failed; it returns the exit
// status.
func BindViewsMain(args []string, w io.Writer) int {
	if len(args)%2 != 0 {
		fmt.Fprintln(w, "den-init: binding views: want pairs of a view and its mount point")
		return 2
	}
	for i := 0; i < len(args); i += 2 {
		if err := bindView(args[i], args[i+1]); err != nil {
			fmt.Fprintf(w, "den-init: binding the view at %s: %v\n", args[i+1], err)
			return 1
		}
	}
	return 0
}

// UnbindViewsMain unmounts the views at the mount points args.
func UnbindViewsMain(args []string, w io.Writer) int {
	for _, dst := range args {
		if err := unbind(dst); err != nil {
			fmt.Fprintf(w, "den-init: unbinding the view at %s: %v\n", dst, err)
			return 1
		}
	}
	return 0
}

// bindView mounts src read-only at dst, making dst when it is missing,
// in place of what was mounted there. dst must be a real path: a
// symbolic link in it (made by the sandbox's own processes) could lead
// the mount over den's own.
func bindView(src, dst string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return fmt.Errorf("making the mount point: %w", err)
	}
	if real, err := filepath.EvalSymlinks(dst); err != nil || real != dst {
		return fmt.Errorf("the mount point leads elsewhere (%s): a symbolic link is in its path", real)
	}
	if err := unbind(dst); err != nil {
		return err
	}
	if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("binding %s: %w", src, err)
	}
	flags := uintptr(unix.MS_BIND | unix.MS_REMOUNT | unix.MS_RDONLY | unix.MS_NOSUID | unix.MS_NODEV)
	if err := unix.Mount("", dst, "", flags, ""); err != nil {
		unbind(dst)
		return fmt.Errorf("making it read-only: %w", err)
	}
	return nil
}

// unbind takes every mount off dst; none there is no error.
func unbind(dst string) error {
	for range maxStack {
		err := unix.Unmount(dst, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW)
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
			return nil // not a mount point (any more)
		}
		if err != nil {
			return fmt.Errorf("unmounting: %w", err)
		}
	}
	return fmt.Errorf("more than %d mounts are on it", maxStack)
}
