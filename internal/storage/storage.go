// Package storage is den's pool of volumes: the root filesystems of images
// and sandboxes, and the read-only snapshots that checkpoints keep.
//
// A Driver stores volumes under keys such as "images/debian" or
// "sandboxes/sb-1234". Two drivers implement it: btrfs (the default: every
// volume is a subvolume, and a snapshot is O(1) whatever its size) and copy
// (for hosts without btrfs: volumes are plain directories and a snapshot is a
// full copy). Both pass the conformance suite in storagetest.
//
// This package holds what the drivers share: the Driver contract, key rules,
// and the walk over the pool's directory tree.
package storage

import (
	"context"
	"io"

	"github.com/den-dev/den/internal/sandbox"
)

// Info describes one volume.
type Info = sandbox.VolumeInfo

// Driver is a pool of copy-on-write volumes.
//
// A volume's life: an image starts as an empty writable volume (Create), is
// filled by the image builder, and is sealed read-only (Seal). A sandbox's
// root filesystem is a writable Snapshot of that image; a checkpoint is a
// read-only Snapshot of the sandbox's volume; a resume or a fork is a
// writable Snapshot of the checkpoint. A snapshot shares nothing observable
// with its parent: writes and deletes on either side are invisible to the
// other. Remove deletes a volume whatever it holds, read-only or not.
//
// Keys are validated with ValidateKey. The directories that hold a key's
// first segments ("images/", "sandboxes/") are plain directories made by the
// driver; a volume cannot live inside another volume.
//
// Errors: ErrInvalid for a bad key, ErrConflict when the key is taken,
// ErrNotFound when a key or a parent does not exist (see internal/errdefs).
//
// Read-only is enforced by the kernel on btrfs; the copy driver records it
// and keeps it through snapshots, but cannot stop a process from writing.
type Driver interface {
	// Name is "btrfs" or "copy".
	Name() string
	// Create makes a new, empty, writable volume and returns its path.
	Create(ctx context.Context, key string) (path string, err error)
	// Snapshot makes volume key from parent as it is now, read-only if
	// asked. On btrfs it takes milliseconds whatever the size.
	Snapshot(ctx context.Context, parent, key string, readonly bool) (path string, err error)
	// Seal makes a writable volume read-only. Sealing a read-only volume
	// does nothing.
	Seal(ctx context.Context, key string) error
	// Remove deletes a volume and everything in it.
	Remove(ctx context.Context, key string) error
	// Path is where volume key lives (or would live) on the host; "" for
	// an invalid key. It does not check that the volume exists.
	Path(key string) string
	// Stat describes an existing volume.
	Stat(ctx context.Context, key string) (Info, error)
	// List returns the volumes whose key starts with prefix, sorted by
	// key. An empty prefix lists them all.
	List(ctx context.Context, prefix string) ([]Info, error)
	// Usage is how many bytes the files in the volume hold (apparent
	// size; a file linked twice counts once).
	Usage(ctx context.Context, key string) (int64, error)

	// SetLimit caps what volume key may hold at bytes, counting what it
	// shares with the volume it was snapshotted from; 0 lifts the cap. A
	// write past the cap fails inside the volume (EDQUOT) and nowhere
	// else. A snapshot starts with its parent's cap, so a sandbox keeps
	// its cap through checkpoints, resumes and forks. A driver that cannot enforce caps says so with ErrUnavailable
	// rather than accept one.
	SetLimit(ctx context.Context, key string, bytes int64) error
	// Quota reports what volume key holds, as its cap counts it, and the
	// cap (0: none).
	Quota(ctx context.Context, key string) (Quota, error)
}

// Quota is what a volume holds against its cap.
type Quota = sandbox.DiskQuota

// Every Driver can serve as the sandbox service's Volumes.
var _ sandbox.Volumes = Driver(nil)

// Mover is a Driver whose read-only volumes can leave the host as a byte
// stream and be made again from one, on this host or another: what the
// blob store keeps of checkpoints and images.
//
// A volume is sent whole, or, with a base, as what differs from that base
// (btrfs send -p). A diff is received only where a copy of the base is:
// the base itself, or a volume received from the base's stream. Receive
// finds it by the stream's own reference, not by key.
type Mover interface {
	// StreamFormat names what Send writes: "btrfs-send" or "tar".
	StreamFormat() string
	// Send writes read-only volume key to w: whole when base is "", else
	// as what differs from read-only volume base, if the driver can.
	// diff says which it wrote.
	Send(ctx context.Context, key, base string, w io.Writer) (diff bool, err error)
	// Receive makes read-only volume key from a stream Send wrote.
	// ErrConflict when key is taken. A failed Receive leaves nothing
	// under key.
	Receive(ctx context.Context, key string, r io.Reader) error
}
