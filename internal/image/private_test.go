package image

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// A mount the bootstrap makes, or unmakes, stays in its own namespace even
// where the host's mounts are shared (as systemd makes /): the test mounts
// under a shared mount and looks for the mount on the host.
func TestPrivateMountsStayPrivate(t *testing.T) {
	if testing.Short() || os.Geteuid() != 0 {
		t.Skip("needs root to mount")
	}
	dir := t.TempDir()
	if err := unix.Mount("den-test", dir, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatalf("mounting a tmpfs: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	if err := unix.Mount("", dir, "", unix.MS_SHARED, ""); err != nil {
		t.Fatalf("making it shared: %v", err)
	}
	mountUnder := func(name string, private bool) string {
		sub := filepath.Join(dir, name)
		// As mmdebstrap does: a namespace of its own, the host's
		// propagation kept.
		cmd := exec.Command("unshare", "--mount", "--propagation", "unchanged",
			"sh", "-c", `mkdir -p "$1" && mount -t tmpfs none "$1"`, "sh", sub)
		if private {
			privateMounts(cmd)
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("mount in a child: %v: %s", err, out)
		}
		return sub
	}
	// Without it the child's mount propagates to the host: the test can
	// tell.
	shared := mountUnder("shared", false)
	if !mounted(t, shared) {
		t.Fatal("a shared namespace's mount did not reach the host: the test cannot tell")
	}
	_ = unix.Unmount(shared, unix.MNT_DETACH)
	if p := mountUnder("private", true); mounted(t, p) {
		_ = unix.Unmount(p, unix.MNT_DETACH)
		t.Error("a mount made under privateMounts reached the host")
	}
}

func mounted(t *testing.T, path string) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == path {
			return true
		}
	}
	return false
}
