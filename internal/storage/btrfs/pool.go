package btrfs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/den-dev/den/internal/errdefs"
	"golang.org/x/sys/unix"
)

// DefaultLoopSize is the size of a loop file den creates when none is given.
// The file is sparse: it takes only what the volumes use.
const DefaultLoopSize int64 = 64 << 30

// minLoopSize leaves room for btrfs's own structures.
const minLoopSize int64 = 256 << 20

// Config says where the pool is.
type Config struct {
	// Dir is where volumes live. If it is on btrfs it is used as it is.
	Dir string
	// LoopFile, when Dir is not on btrfs, is a file holding a btrfs
	// filesystem that is mounted at Dir; it is created and formatted
	// when missing.
	LoopFile string
	// LoopSize is the size of LoopFile when it is created
	// (DefaultLoopSize if 0).
	LoopSize int64
	// Quotas is how size caps are counted once the first is set (see
	// QuotaMode); a filesystem whose quotas are already on keeps its mode.
	Quotas QuotaMode
	// Reserve is how much of the pool sandboxes' volumes together may not
	// take, kept for den's own snapshots (see reserve.go); 0: none.
	Reserve int64
}

// Validate names the first bad field.
func (c Config) Validate() error {
	switch {
	case c.Dir == "":
		return errdefs.Invalid("storage config: Dir is required")
	case !filepath.IsAbs(c.Dir):
		return errdefs.Invalid("storage config: Dir must be an absolute path")
	case c.LoopFile != "" && !filepath.IsAbs(c.LoopFile):
		return errdefs.Invalid("storage config: LoopFile must be an absolute path")
	case c.LoopSize != 0 && c.LoopSize < minLoopSize:
		return errdefs.Invalid("storage config: LoopSize must be at least %d MiB", minLoopSize>>20)
	case c.Reserve < 0:
		return errdefs.Invalid("storage config: Reserve must not be negative")
	case c.Quotas != QuotasAuto && c.Quotas != QuotasSimple && c.Quotas != QuotasFull:
		return errdefs.Invalid("storage config: Quotas must be %q, %q or empty", QuotasSimple, QuotasFull)
	}
	return nil
}

// Log keys.
const (
	logKeyDir    = "dir"
	logKeyFile   = "loop_file"
	logKeySize   = "size"
	logKeyDevice = "device"
)

// Open returns the pool at cfg.Dir. When Dir is not on btrfs and a LoopFile
// is configured, Open creates the file if it is missing, formats it if it
// holds nothing, and mounts it at Dir. It is idempotent: a pool already
// mounted is used as it is. The mount outlives the Driver and the daemon.
func Open(ctx context.Context, cfg Config, log *slog.Logger) (*Driver, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.LoopSize == 0 {
		cfg.LoopSize = DefaultLoopSize
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("opening storage pool: %w", err)
	}
	ok, err := IsBtrfs(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("opening storage pool: %w", err)
	}
	if !ok {
		if cfg.LoopFile == "" {
			return nil, errdefs.WithHint(
				errdefs.Invalid("the storage directory is not on a btrfs filesystem"),
				"configure a loop file for den to keep a btrfs pool in, move the storage directory onto btrfs, or use the copy storage driver")
		}
		if err := mountLoopFile(ctx, cfg, log); err != nil {
			return nil, fmt.Errorf("opening storage pool: %w", err)
		}
		if ok, err = IsBtrfs(cfg.Dir); err != nil || !ok {
			return nil, fmt.Errorf("opening storage pool: the loop file was mounted but the directory is not on btrfs (%v)", err)
		}
	}
	log.Debug("storage pool open", logKeyDir, cfg.Dir)
	return newDriver(cfg.Dir, cfg.Quotas, cfg.Reserve, log), nil
}

// IsBtrfs tells whether dir is on a btrfs filesystem.
func IsBtrfs(dir string) (bool, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return false, &os.PathError{Op: "statfs", Path: dir, Err: err}
	}
	return st.Type == unix.BTRFS_SUPER_MAGIC, nil
}

// mountLoopFile makes sure cfg.LoopFile holds a btrfs filesystem and mounts
// it at cfg.Dir.
func mountLoopFile(ctx context.Context, cfg Config, log *slog.Logger) error {
	created, err := createSparse(cfg.LoopFile, cfg.LoopSize)
	if err != nil {
		return err
	}
	if created {
		log.Info("created storage loop file", logKeyFile, cfg.LoopFile, logKeySize, cfg.LoopSize)
	}
	formatted, err := hasBtrfs(cfg.LoopFile)
	if err != nil {
		return err
	}
	if !formatted {
		if !created {
			empty, err := isEmpty(cfg.LoopFile)
			if err != nil {
				return err
			}
			if !empty {
				return errdefs.WithHint(
					errdefs.Invalid("the storage loop file holds data that is not a btrfs filesystem; den will not format it"),
					"remove the loop file, or configure another one")
			}
		}
		if err := mkfs(ctx, cfg.LoopFile); err != nil {
			return err
		}
		log.Info("formatted storage loop file", logKeyFile, cfg.LoopFile)
	}
	dev, err := mountLoop(cfg.LoopFile, cfg.Dir)
	if err != nil {
		return err
	}
	log.Info("mounted storage pool", logKeyFile, cfg.LoopFile, logKeyDevice, dev, logKeyDir, cfg.Dir)
	return nil
}

// createSparse creates file with size if it does not exist.
func createSparse(file string, size int64) (created bool, err error) {
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return false, err
	}
	f, err := os.OpenFile(file, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("creating loop file: %w", err)
	}
	if err := f.Truncate(size); err != nil {
		f.Close()
		os.Remove(file)
		return false, fmt.Errorf("sizing loop file: %w", err)
	}
	if err := f.Close(); err != nil {
		return false, err
	}
	return true, nil
}

// superblock is where btrfs keeps its primary superblock's magic.
const (
	superMagicOffset = 0x10000 + 0x40
	superMagic       = "_BHRfS_M"
)

// hasBtrfs tells whether file starts with a btrfs superblock.
func hasBtrfs(file string) (bool, error) {
	f, err := os.Open(file)
	if err != nil {
		return false, err
	}
	defer f.Close()
	buf := make([]byte, len(superMagic))
	if _, err := f.ReadAt(buf, superMagicOffset); err != nil {
		if errors.Is(err, io.EOF) {
			return false, nil
		}
		return false, err
	}
	return string(buf) == superMagic, nil
}

// isEmpty tells whether file was never written: it has no data at all,
// only a hole (a half-done mkfs leaves data behind).
func isEmpty(file string) (bool, error) {
	f, err := os.Open(file)
	if err != nil {
		return false, err
	}
	defer f.Close()
	_, err = unix.Seek(int(f.Fd()), 0, unix.SEEK_DATA)
	if errors.Is(err, unix.ENXIO) {
		return true, nil
	}
	return false, err
}

// mkfs formats file as btrfs. It never forces: mkfs.btrfs refuses a file
// that holds another filesystem.
func mkfs(ctx context.Context, file string) error {
	bin, err := exec.LookPath("mkfs.btrfs")
	if err != nil {
		return errdefs.WithHint(errdefs.Unavailable("mkfs.btrfs is not installed"), "install btrfs-progs")
	}
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, "-q", "-L", "den", file)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("formatting loop file: %w: %s", err, strings.TrimSpace(out.String()))
	}
	return nil
}
