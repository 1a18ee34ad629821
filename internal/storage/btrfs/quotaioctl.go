package btrfs

import (
	"os"
	"unsafe"
)

// The quota ioctls, from linux/btrfs.h (simple quotas from Linux 6.7).
const (
	quotaCtlEnable       = 1 // BTRFS_QUOTA_CTL_ENABLE
	quotaCtlEnableSimple = 4 // BTRFS_QUOTA_CTL_ENABLE_SIMPLE_QUOTA

	limitMaxRfer = 1 << 0     // BTRFS_QGROUP_LIMIT_MAX_RFER
	clearLimit   = ^uint64(0) // CLEAR_VALUE: lifts a limit

	// qgroupLevelShift: a quota group id is level<<48 | id.
	qgroupLevelShift = 48

	firstFreeObjectID = subvolRootIno // BTRFS_FIRST_FREE_OBJECTID
	inoLookupPathMax  = 4080          // BTRFS_INO_LOOKUP_PATH_MAX

	iocReadWrite = iocRead | iocWrite

	iocInoLookup       = iocReadWrite | unsafe.Sizeof(inoLookupArgs{})<<16 | iocMagic<<8 | 18 // BTRFS_IOC_INO_LOOKUP
	iocFsInfo          = iocRead | unsafe.Sizeof(fsInfoArgs{})<<16 | iocMagic<<8 | 31         // BTRFS_IOC_FS_INFO
	iocQuotaCtl        = iocReadWrite | unsafe.Sizeof(quotaCtlArgs{})<<16 | iocMagic<<8 | 40  // BTRFS_IOC_QUOTA_CTL
	iocQgroupAssign    = iocWrite | unsafe.Sizeof(qgroupAssignArgs{})<<16 | iocMagic<<8 | 41  // BTRFS_IOC_QGROUP_ASSIGN
	iocQgroupCreate    = iocWrite | unsafe.Sizeof(qgroupCreateArgs{})<<16 | iocMagic<<8 | 42  // BTRFS_IOC_QGROUP_CREATE
	iocQgroupLimit     = iocRead | unsafe.Sizeof(qgroupLimitArgs{})<<16 | iocMagic<<8 | 43    // BTRFS_IOC_QGROUP_LIMIT
	iocQuotaRescan     = iocWrite | unsafe.Sizeof(rescanArgs{})<<16 | iocMagic<<8 | 44        // BTRFS_IOC_QUOTA_RESCAN
	iocQuotaRescanWait = iocMagic<<8 | 46                                                     // BTRFS_IOC_QUOTA_RESCAN_WAIT
)

// inoLookupArgs is struct btrfs_ioctl_ino_lookup_args.
type inoLookupArgs struct {
	treeid   uint64
	objectid uint64
	name     [inoLookupPathMax]byte
}

// fsInfoArgs is struct btrfs_ioctl_fs_info_args.
type fsInfoArgs struct {
	maxID        uint64
	numDevices   uint64
	fsid         [16]byte
	nodesize     uint32
	sectorsize   uint32
	cloneAlign   uint32
	csumType     uint16
	csumSize     uint16
	flags        uint64
	generation   uint64
	metadataUUID [16]byte
	reserved     [944]byte
}

// quotaCtlArgs is struct btrfs_ioctl_quota_ctl_args.
type quotaCtlArgs struct {
	cmd    uint64
	status uint64
}

// qgroupAssignArgs is struct btrfs_ioctl_qgroup_assign_args.
type qgroupAssignArgs struct {
	assign uint64
	src    uint64
	dst    uint64
}

// qgroupCreateArgs is struct btrfs_ioctl_qgroup_create_args.
type qgroupCreateArgs struct {
	create   uint64
	qgroupid uint64
}

// qgroupLimitArgs is struct btrfs_ioctl_qgroup_limit_args.
type qgroupLimitArgs struct {
	qgroupid uint64
	flags    uint64
	maxRfer  uint64
	maxExcl  uint64
	rsvRfer  uint64
	rsvExcl  uint64
}

// rescanArgs is struct btrfs_ioctl_quota_rescan_args.
type rescanArgs struct {
	flags    uint64
	progress uint64
	reserved [6]uint64
}

// subvolID returns the id of the subvolume whose top directory is path.
func subvolID(path string) (uint64, error) {
	f, err := openDir(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	args := inoLookupArgs{objectid: firstFreeObjectID}
	if err := ioctl(int(f.Fd()), iocInoLookup, unsafe.Pointer(&args)); err != nil {
		return 0, err
	}
	return args.treeid, nil
}

// fsid returns the id of the filesystem f is on.
func fsid(f *os.File) ([16]byte, error) {
	var args fsInfoArgs
	err := ioctl(int(f.Fd()), iocFsInfo, unsafe.Pointer(&args))
	return args.fsid, err
}

// quotaCtl turns quotas on (cmd quotaCtlEnable or quotaCtlEnableSimple)
// for the filesystem f is on.
func quotaCtl(f *os.File, cmd uint64) error {
	args := quotaCtlArgs{cmd: cmd}
	return ioctl(int(f.Fd()), iocQuotaCtl, unsafe.Pointer(&args))
}

// quotaRescan starts a recount of full quotas.
func quotaRescan(f *os.File) error {
	var args rescanArgs
	return ioctl(int(f.Fd()), iocQuotaRescan, unsafe.Pointer(&args))
}

// qgroupCreate makes quota group id.
func qgroupCreate(f *os.File, id uint64) error {
	args := qgroupCreateArgs{create: 1, qgroupid: id}
	return ioctl(int(f.Fd()), iocQgroupCreate, unsafe.Pointer(&args))
}

// qgroupAssign makes quota group child a member of parent.
func qgroupAssign(f *os.File, child, parent uint64) error {
	args := qgroupAssignArgs{assign: 1, src: child, dst: parent}
	return ioctl(int(f.Fd()), iocQgroupAssign, unsafe.Pointer(&args))
}

// qgroupLimit caps quota group id's referenced bytes; 0 lifts the cap.
func qgroupLimit(f *os.File, id uint64, bytes int64) error {
	args := qgroupLimitArgs{qgroupid: id, flags: limitMaxRfer, maxRfer: clearLimit}
	if bytes > 0 {
		args.maxRfer = uint64(bytes)
	}
	return ioctl(int(f.Fd()), iocQgroupLimit, unsafe.Pointer(&args))
}
