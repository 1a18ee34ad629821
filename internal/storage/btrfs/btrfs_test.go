package btrfs

import (
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/den-dev/den/internal/errdefs"
)

// The request numbers match linux/btrfs.h as the kernel headers compute them.
func TestIoctlNumbers(t *testing.T) {
	for _, tt := range []struct {
		name      string
		got, want uintptr
	}{
		{"BTRFS_IOC_SUBVOL_CREATE", iocSubvolCreate, 0x5000940e},
		{"BTRFS_IOC_SNAP_DESTROY", iocSnapDestroy, 0x5000940f},
		{"BTRFS_IOC_SNAP_CREATE_V2", iocSnapCreateV2, 0x50009417},
		{"BTRFS_IOC_SUBVOL_GETFLAGS", iocSubvolGetflags, 0x80089419},
		{"BTRFS_IOC_SUBVOL_SETFLAGS", iocSubvolSetflags, 0x4008941a},
		{"BTRFS_IOC_INO_LOOKUP", iocInoLookup, 0xd0009412},
		{"BTRFS_IOC_FS_INFO", iocFsInfo, 0x8400941f},
		{"BTRFS_IOC_QUOTA_CTL", iocQuotaCtl, 0xc0109428},
		{"BTRFS_IOC_QGROUP_LIMIT", iocQgroupLimit, 0x8030942b},
		{"BTRFS_IOC_QUOTA_RESCAN", iocQuotaRescan, 0x4040942c},
		{"BTRFS_IOC_QUOTA_RESCAN_WAIT", iocQuotaRescanWait, 0x942e},
	} {
		if tt.got != tt.want {
			t.Errorf("%s = %#x, want %#x", tt.name, tt.got, tt.want)
		}
	}
	if s := unsafe.Sizeof(volArgs{}); s != 4096 {
		t.Errorf("sizeof(btrfs_ioctl_vol_args) = %d, want 4096", s)
	}
	if s := unsafe.Sizeof(volArgsV2{}); s != 4096 {
		t.Errorf("sizeof(btrfs_ioctl_vol_args_v2) = %d, want 4096", s)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tt := range []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"dir only", Config{Dir: "/var/lib/den/pool"}, true},
		{"loop file", Config{Dir: "/var/lib/den/pool", LoopFile: "/var/lib/den/pool.img", LoopSize: 1 << 30}, true},
		{"no dir", Config{}, false},
		{"relative dir", Config{Dir: "pool"}, false},
		{"relative loop file", Config{Dir: "/p", LoopFile: "pool.img"}, false},
		{"tiny loop", Config{Dir: "/p", LoopFile: "/p.img", LoopSize: 1 << 20}, false},
	} {
		err := tt.cfg.Validate()
		if tt.ok && err != nil {
			t.Errorf("%s: %v", tt.name, err)
		}
		if !tt.ok && !errors.Is(err, errdefs.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", tt.name, err)
		}
	}
}

// notOnBtrfs returns a temporary directory, skipping if it is on btrfs
// (where the cases below cannot happen).
func notOnBtrfs(t *testing.T) string {
	dir := t.TempDir()
	if ok, err := IsBtrfs(dir); err != nil || ok {
		t.Skipf("the temporary directory is on btrfs (%v)", err)
	}
	return dir
}

func TestOpenNotBtrfsWithoutLoopFile(t *testing.T) {
	dir := notOnBtrfs(t)
	_, err := Open(t.Context(), Config{Dir: filepath.Join(dir, "pool")}, slog.New(slog.DiscardHandler))
	if !errors.Is(err, errdefs.ErrInvalid) {
		t.Fatalf("Open = %v, want ErrInvalid", err)
	}
	if errdefs.Hint(err) == "" {
		t.Errorf("the error carries no hint: %v", err)
	}
}

// A loop file that holds anything but btrfs is never formatted.
func TestOpenRefusesForeignLoopFile(t *testing.T) {
	dir := notOnBtrfs(t)
	file := filepath.Join(dir, "pool.img")
	data := []byte("someone's data, not a filesystem")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Dir: filepath.Join(dir, "pool"), LoopFile: file, LoopSize: 1 << 30}
	_, err := Open(t.Context(), cfg, slog.New(slog.DiscardHandler))
	if !errors.Is(err, errdefs.ErrInvalid) {
		t.Fatalf("Open = %v, want ErrInvalid", err)
	}
	if b, _ := os.ReadFile(file); string(b) != string(data) {
		t.Errorf("the loop file was changed")
	}
}

func TestLoopFileStates(t *testing.T) {
	file := filepath.Join(t.TempDir(), "sub", "pool.img")
	created, err := createSparse(file, 1<<30)
	if err != nil || !created {
		t.Fatalf("createSparse = %v, %v", created, err)
	}
	if again, err := createSparse(file, 1<<30); err != nil || again {
		t.Fatalf("second createSparse = %v, %v; want false, nil", again, err)
	}
	if fi, err := os.Stat(file); err != nil || fi.Size() != 1<<30 {
		t.Fatalf("loop file: %v, %v", fi, err)
	}
	if empty, err := isEmpty(file); err != nil || !empty {
		t.Errorf("a new sparse file: isEmpty = %v, %v", empty, err)
	}
	if ok, err := hasBtrfs(file); err != nil || ok {
		t.Errorf("a new sparse file: hasBtrfs = %v, %v", ok, err)
	}
	if _, err := exec.LookPath("mkfs.btrfs"); err != nil {
		t.Skip("needs mkfs.btrfs")
	}
	if err := mkfs(t.Context(), file); err != nil {
		t.Fatal(err)
	}
	if ok, err := hasBtrfs(file); err != nil || !ok {
		t.Errorf("after mkfs: hasBtrfs = %v, %v", ok, err)
	}
	if empty, err := isEmpty(file); err != nil || empty {
		t.Errorf("after mkfs: isEmpty = %v, %v", empty, err)
	}
}
