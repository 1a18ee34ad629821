package netns

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
}

// mountsAt lists the mounts whose mount point is path, hidden ones too,
// each by its optional fields (propagation: "shared:N", ...).
func mountsAt(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 7 || f[4] != path {
			continue
		}
		var opt []string
		for _, o := range f[6:] {
			if o == "-" {
				break
			}
			opt = append(opt, o)
		}
		got = append(got, strings.Join(opt, " "))
	}
	return got
}

// What iproute2's namespace add does to /run/netns, done to a directory of the
// test's own (so nothing else on the host sees it): bind-mount it onto
// itself, recursively, make it shared, and mount a namespace of its own
// in it. The namespace mounted there before is hidden: unmounting its
// path takes off only the copy, and removing the file fails (EBUSY).
// removeNamed removes it all the same, takes its hidden mount off, and
// leaves the other tool's mount and namespace as they were.
func TestRemoveNamedHiddenByRebind(t *testing.T) {
	needRoot(t)
	dir := t.TempDir()
	mine, tools := filepath.Join(dir, "den-x"), filepath.Join(dir, "tools")
	ns, err := newNamedAt(mine)
	if err != nil {
		t.Fatal(err)
	}
	ns.Close()
	if err := unix.Mount(dir, dir, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		removeNamed(tools)
		unix.Unmount(dir, unix.MNT_DETACH)
		unmountAll(mine)
	})
	if err := unix.Mount("", dir, "", unix.MS_SHARED|unix.MS_REC, ""); err != nil {
		t.Fatal(err)
	}
	if ns, err = newNamedAt(tools); err != nil {
		t.Fatal(err)
	}
	ns.Close()
	if n := len(mountsAt(t, mine)); n != 2 {
		t.Fatalf("%d mounts at %s, want 2: the hidden one and its copy", n, mine)
	}

	before, _ := os.Readlink("/proc/self/ns/mnt")

	// As dend removed it before.
	unix.Unmount(mine, unix.MNT_DETACH)
	if err := unix.Unlink(mine); !errors.Is(err, unix.EBUSY) {
		t.Fatalf("removing the hidden namespace's file: %v, want EBUSY", err)
	}

	if err := removeNamed(mine); err != nil {
		t.Fatalf("removeNamed: %v", err)
	}
	if _, err := os.Lstat(mine); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s is still there: %v", mine, err)
	}
	if m := mountsAt(t, mine); len(m) != 0 {
		t.Errorf("mounts left at %s: %q", mine, m)
	}
	if !isNamespace(tools) {
		t.Errorf("the other tool's namespace %s is gone", tools)
	}
	if m := mountsAt(t, dir); len(m) != 1 || !strings.Contains(m[0], "shared:") {
		t.Errorf("the other tool's mount of %s changed: %q", dir, m)
	}
	if after, _ := os.Readlink("/proc/self/ns/mnt"); after != before {
		t.Errorf("dend's main thread moved from mount namespace %s to %s", before, after)
	}
	// Nothing there is fine.
	if err := removeNamed(mine); err != nil {
		t.Errorf("removing it again: %v", err)
	}
}

// openDir makes den's directory a private mount of itself, keeps it
// while namespaces are in it, and closeDir takes it away once empty.
func TestOpenDirIsPrivate(t *testing.T) {
	needRoot(t)
	dir := filepath.Join(t.TempDir(), "netns")
	t.Cleanup(func() { unmountAll(dir) })
	for range 2 { // again: the mount of the last dend is kept
		if err := openDir(dir); err != nil {
			t.Fatal(err)
		}
		m := mountsAt(t, dir)
		if len(m) != 1 || m[0] != "" {
			t.Fatalf("mounts at %s: %q, want one private one", dir, m)
		}
	}
	ns, err := newNamedAt(filepath.Join(dir, "den-x"))
	if err != nil {
		t.Fatal(err)
	}
	ns.Close()
	if err := closeDir(dir); err != nil {
		t.Fatal(err)
	}
	if len(mountsAt(t, dir)) != 1 || !isNamespace(filepath.Join(dir, "den-x")) {
		t.Fatal("closeDir took away a directory a namespace is in")
	}
	if err := removeNamed(filepath.Join(dir, "den-x")); err != nil {
		t.Fatal(err)
	}
	if err := closeDir(dir); err != nil {
		t.Fatal(err)
	}
	if m := mountsAt(t, dir); len(m) != 0 {
		t.Fatalf("mounts left at %s: %q", dir, m)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s is left: %v", dir, err)
	}
}
