package btrfs

import (
	"errors"
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The btrfs ioctls den uses, from linux/btrfs.h. x/sys/unix does not carry
// them, so they are spelled out here.
const (
	iocMagic = 0x94

	pathNameMax   = 4087 // BTRFS_PATH_NAME_MAX
	subvolNameMax = 4039 // BTRFS_SUBVOL_NAME_MAX

	// subvolRootIno is the inode number of every subvolume's top
	// directory (BTRFS_FIRST_FREE_OBJECTID): how a subvolume is told apart
	// from a plain directory.
	subvolRootIno = 256

	subvolRdonly = 1 << 1 // BTRFS_SUBVOL_RDONLY
)

// volArgs is struct btrfs_ioctl_vol_args.
type volArgs struct {
	fd   int64
	name [pathNameMax + 1]byte
}

// volArgsV2 is struct btrfs_ioctl_vol_args_v2 (the unions at their
// largest members).
type volArgsV2 struct {
	fd      int64
	transid uint64
	flags   uint64
	unused  [4]uint64
	name    [subvolNameMax + 1]byte
}

// Request numbers, built as the kernel's _IOW and _IOR macros build them.
const (
	iocWrite = 1 << 30
	iocRead  = 2 << 30

	iocSubvolCreate   = iocWrite | unsafe.Sizeof(volArgs{})<<16 | iocMagic<<8 | 14   // BTRFS_IOC_SUBVOL_CREATE
	iocSnapDestroy    = iocWrite | unsafe.Sizeof(volArgs{})<<16 | iocMagic<<8 | 15   // BTRFS_IOC_SNAP_DESTROY
	iocSnapCreateV2   = iocWrite | unsafe.Sizeof(volArgsV2{})<<16 | iocMagic<<8 | 23 // BTRFS_IOC_SNAP_CREATE_V2
	iocSubvolGetflags = iocRead | 8<<16 | iocMagic<<8 | 25                           // BTRFS_IOC_SUBVOL_GETFLAGS
	iocSubvolSetflags = iocWrite | 8<<16 | iocMagic<<8 | 26                          // BTRFS_IOC_SUBVOL_SETFLAGS
)

func ioctl(fd int, req uintptr, arg unsafe.Pointer) error {
	for {
		_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), req, uintptr(arg))
		switch errno {
		case 0:
			return nil
		case unix.EINTR:
			continue
		default:
			return errno
		}
	}
}

// openDir opens a directory for ioctls, refusing to follow a symbolic link
// at its last component.
func openDir(path string) (*os.File, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return os.NewFile(uintptr(fd), path), nil
}

// setName copies name into a NUL-terminated ioctl name field.
func setName(dst []byte, name string) error {
	if len(name) >= len(dst) {
		return errors.New("name too long")
	}
	copy(dst, name)
	return nil
}

// subvolCreate makes an empty subvolume called name in directory dir.
func subvolCreate(dir *os.File, name string) error {
	var args volArgs
	if err := setName(args.name[:], name); err != nil {
		return err
	}
	return ioctl(int(dir.Fd()), iocSubvolCreate, unsafe.Pointer(&args))
}

// snapCreate makes a snapshot of the subvolume src called name in
// directory dir.
func snapCreate(src, dir *os.File, name string, readonly bool) error {
	args := volArgsV2{fd: int64(src.Fd())}
	if readonly {
		args.flags = subvolRdonly
	}
	if err := setName(args.name[:], name); err != nil {
		return err
	}
	return ioctl(int(dir.Fd()), iocSnapCreateV2, unsafe.Pointer(&args))
}

// snapDestroy deletes the subvolume called name in directory dir.
func snapDestroy(dir *os.File, name string) error {
	var args volArgs
	if err := setName(args.name[:], name); err != nil {
		return err
	}
	return ioctl(int(dir.Fd()), iocSnapDestroy, unsafe.Pointer(&args))
}

func getFlags(subvol *os.File) (uint64, error) {
	var flags uint64
	err := ioctl(int(subvol.Fd()), iocSubvolGetflags, unsafe.Pointer(&flags))
	return flags, err
}

func setFlags(subvol *os.File, flags uint64) error {
	return ioctl(int(subvol.Fd()), iocSubvolSetflags, unsafe.Pointer(&flags))
}

// isReadOnly tells whether the subvolume at path is read-only.
func isReadOnly(path string) (bool, error) {
	f, err := openDir(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	flags, err := getFlags(f)
	if err != nil {
		return false, fmt.Errorf("reading subvolume flags: %w", err)
	}
	return flags&subvolRdonly != 0, nil
}

// setReadOnly sets or clears the read-only flag of the subvolume at path.
func setReadOnly(path string, readonly bool) error {
	f, err := openDir(path)
	if err != nil {
		return err
	}
	defer f.Close()
	flags, err := getFlags(f)
	if err != nil {
		return fmt.Errorf("reading subvolume flags: %w", err)
	}
	want := flags &^ subvolRdonly
	if readonly {
		want |= subvolRdonly
	}
	if want == flags {
		return nil
	}
	if err := setFlags(f, want); err != nil {
		return fmt.Errorf("setting subvolume flags: %w", err)
	}
	return nil
}
