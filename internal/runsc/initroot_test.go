package runsc

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// placeInit copies the version's binary into a root, following nothing
// the sandbox made there, and the copies of one version look alike.
func TestPlaceInit(t *testing.T) {
	base := t.TempDir()
	initDir := filepath.Join(base, "init")
	bin := filepath.Join(base, "den-init")
	if err := os.WriteFile(bin, elfWith(t, "den-init to place", false), 0o755); err != nil {
		t.Fatal(err)
	}
	version, err := InstallInit(initDir, bin)
	if err != nil {
		t.Fatal(err)
	}
	installed := filepath.Join(initDir, version, "den-init")
	old := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	if err := os.Chtimes(installed, old, old); err != nil {
		t.Fatal(err)
	}
	want, _ := os.ReadFile(installed)
	r := &Runtime{cfg: Config{InitDir: initDir}}
	roots := filepath.Join(base, "pool", "sandboxes")
	host := filepath.Join(base, "host") // what a sandbox's links point at
	if err := os.MkdirAll(host, 0o755); err != nil {
		t.Fatal(err)
	}
	hostFile := filepath.Join(host, "den-init")
	if err := os.WriteFile(hostFile, []byte("host file"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A copy of an older version kept beside the roots goes.
	if err := os.MkdirAll(roots, 0o755); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(roots, ".den-init-r-0000000000000000")
	if err := os.WriteFile(stale, nil, 0o755); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name  string
		setup func(root string) error
	}{
		{"a fresh root", func(string) error { return nil }},
		{"an older den-init in place", func(root string) error {
			if err := os.MkdirAll(filepath.Join(root, ".den"), 0o755); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(root, ".den", "den-init"), []byte("older"), 0o700)
		}},
		{"/.den a symlink to a host directory", func(root string) error { return os.Symlink(host, filepath.Join(root, ".den")) }},
		{"/.den a file", func(root string) error { return os.WriteFile(filepath.Join(root, ".den"), []byte("x"), 0o644) }},
		{"/.den/den-init a symlink to a host file", func(root string) error {
			if err := os.MkdirAll(filepath.Join(root, ".den"), 0o755); err != nil {
				return err
			}
			return os.Symlink(hostFile, filepath.Join(root, ".den", "den-init"))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := filepath.Join(roots, filepath.Base(t.Name()))
			if err := os.MkdirAll(root, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := tc.setup(root); err != nil {
				t.Fatal(err)
			}
			if !initMissing(root) && tc.name != "an older den-init in place" {
				t.Error("initMissing = false before den-init was placed")
			}
			if err := r.placeInit(root, version); err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(root, ".den", "den-init")
			fi, err := os.Lstat(p)
			if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o755 || !fi.ModTime().Equal(old) {
				t.Fatalf("placed: %v, %v; want a regular file, mode 0755, modified %v", fi, err, old)
			}
			if got, _ := os.ReadFile(p); string(got) != string(want) {
				t.Error("the placed den-init differs from the installed one")
			}
			if di, err := os.Lstat(filepath.Join(root, ".den")); err != nil || !di.IsDir() {
				t.Errorf("/.den is %v, %v; want a directory", di, err)
			}
			if initMissing(root) {
				t.Error("initMissing = true after den-init was placed")
			}
			if got, _ := os.ReadFile(hostFile); string(got) != "host file" {
				t.Errorf("the host file became %q", got)
			}
			if ents, _ := os.ReadDir(host); len(ents) != 1 {
				t.Errorf("the host directory holds %d entries, want 1", len(ents))
			}
			if ents, _ := os.ReadDir(filepath.Join(root, ".den")); len(ents) != 1 {
				t.Errorf("/.den holds %v, want den-init alone", ents)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(roots, ".den-init-"+version)); err != nil {
		t.Errorf("no copy kept beside the roots: %v", err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("an older version's copy beside the roots stayed: %v", err)
	}

	// A version this host lacks places nothing.
	root := filepath.Join(roots, "lacking")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := r.placeInit(root, "r-0123456789abcdef"); err == nil {
		t.Error("placing a version this host lacks succeeded")
	}
	if ents, _ := os.ReadDir(root); len(ents) != 0 {
		t.Errorf("a failed placement left %v", ents)
	}
}

// prefetchInit reads ahead a root's den-init, and opens nothing the
// sandbox put at /.den in its place: not a symlink out of the root, not a
// FIFO that would block an open until someone writes to it.
func TestPrefetchInitFollowsNothing(t *testing.T) {
	base := t.TempDir()
	host := filepath.Join(base, "host")
	if err := os.MkdirAll(host, 0o755); err != nil {
		t.Fatal(err)
	}
	hostFIFO := filepath.Join(host, "den-init")
	if err := syscall.Mkfifo(hostFIFO, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		make func(den string) error
	}{
		{"the binary", func(den string) error { return os.WriteFile(filepath.Join(den, "den-init"), []byte("\x7fELF"), 0o755) }},
		{"no binary", func(den string) error { return nil }},
		{"a FIFO", func(den string) error { return syscall.Mkfifo(filepath.Join(den, "den-init"), 0o600) }},
		{"a link to a host FIFO", func(den string) error { return os.Symlink(hostFIFO, filepath.Join(den, "den-init")) }},
		{"/.den a link to a host directory", func(den string) error {
			if err := os.Remove(den); err != nil {
				return err
			}
			return os.Symlink(host, den)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rootfs := filepath.Join(t.TempDir(), "root")
			den := filepath.Join(rootfs, ".den")
			if err := os.MkdirAll(den, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := tc.make(den); err != nil {
				t.Fatal(err)
			}
			done := make(chan struct{})
			go func() {
				defer close(done)
				prefetchInit(rootfs)
			}()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("prefetchInit blocked: it opened what the sandbox put at /.den")
			}
		})
	}
}
