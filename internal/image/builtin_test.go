package image

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/sandbox"
)

func needBusybox(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(DefaultBusybox); err != nil {
		t.Skip("busybox-static is not installed")
	}
}

func TestBuildBusybox(t *testing.T) {
	needBusybox(t)
	f := newFixture(t)
	ctx := context.Background()
	var phases []string
	im, err := f.m.Build(ctx, "busybox", false, func(p Progress) { phases = append(phases, p.Phase) })
	if err != nil {
		t.Fatal(err)
	}
	if im.Name != "busybox" || im.Source != SourceBuiltin || im.SizeBytes <= 0 || im.CreatedAt.IsZero() {
		t.Errorf("record %+v", im)
	}
	if len(im.Env) == 0 || im.Env[0] != defaultPath {
		t.Errorf("env %q, want %q", im.Env, defaultPath)
	}
	if len(phases) == 0 {
		t.Error("no progress reported")
	}
	root := f.pool.Path(im.VolumeKey())
	if target, err := os.Readlink(filepath.Join(root, "bin/sh")); err != nil || target != "busybox" {
		t.Errorf("bin/sh -> %q (%v), want busybox", target, err)
	}
	if fi, err := os.Lstat(filepath.Join(root, "bin/busybox")); err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o755 {
		t.Errorf("bin/busybox: %v %v, want a 0755 regular file", fi, err)
	}
	passwd, err := os.ReadFile(filepath.Join(root, "etc/passwd"))
	if err != nil || !strings.HasPrefix(string(passwd), "root:x:0:0:") || !strings.Contains(string(passwd), "nobody:") {
		t.Errorf("etc/passwd: %q %v", passwd, err)
	}
	want := map[string]string{"tmp": "dir 1777", "root": "dir 0700", "var/tmp": "dir 1777", "etc/resolv.conf": "file 0644 ", "etc/hostname": "file 0644 localhost\n"}
	got := tree(t, root)
	for p, w := range want {
		if got[p] != w {
			t.Errorf("%s: %q, want %q", p, got[p], w)
		}
	}
	for _, d := range []string{"proc", "sys", "dev", "home", "usr/bin", "sbin"} {
		if !strings.HasPrefix(got[d], "dir ") {
			t.Errorf("%s: %q, want a directory", d, got[d])
		}
	}
	if !f.pool.sealed[im.VolumeKey()] {
		t.Error("volume not sealed")
	}
	rec, err := f.records.GetImage(ctx, "busybox")
	if err != nil || rec.SizeBytes != im.SizeBytes {
		t.Errorf("record %+v, %v", rec, err)
	}

	// Built already: nothing to do, unless forced.
	again, err := f.m.Build(ctx, "busybox", false, nil)
	if err != nil || !again.CreatedAt.Equal(im.CreatedAt) || f.pool.createCount() != 1 {
		t.Errorf("second build: %v, creates %d", err, f.pool.createCount())
	}
	if _, err := f.m.Build(ctx, "busybox", true, nil); err != nil || f.pool.createCount() != 2 {
		t.Errorf("forced build: %v, creates %d", err, f.pool.createCount())
	}
}

func TestEnsureBuildsBuiltinOnce(t *testing.T) {
	needBusybox(t)
	f := newFixture(t)
	const callers = 8
	var wg sync.WaitGroup
	images := make([]*sandbox.Image, callers)
	errs := make([]error, callers)
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			images[i], errs[i] = f.m.Ensure(context.Background(), "busybox")
		}()
	}
	wg.Wait()
	for i := range callers {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if !images[i].CreatedAt.Equal(images[0].CreatedAt) {
			t.Errorf("caller %d got another image", i)
		}
	}
	if n := f.pool.createCount(); n != 1 {
		t.Errorf("built %d times, want once", n)
	}
}

func TestBuildBusyboxMissing(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.Busybox = filepath.Join(t.TempDir(), "busybox") })
	_, err := f.m.Ensure(context.Background(), "busybox")
	assertClass(t, err, errdefs.ErrUnavailable)
	if !strings.Contains(errdefs.Hint(err), "apt-get install busybox-static") {
		t.Errorf("hint %q", errdefs.Hint(err))
	}
	f.assertNothingOf(t, "busybox")
}

func TestBuildCancelledLeavesNothing(t *testing.T) {
	needBusybox(t)
	f := newFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	_, err := f.m.Build(ctx, "busybox", false, func(Progress) { cancel() })
	if err == nil {
		t.Fatal("build went on after cancel")
	}
	f.assertNothingOf(t, "busybox")
}

func TestNamesAndHints(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	cases := []struct {
		name  string
		err   error
		class error
		hint  string
	}{
		{"build bad name", func() error { _, err := f.m.Build(ctx, "Bad_Name", false, nil); return err }(), errdefs.ErrInvalid, "lowercase"},
		{"ensure empty name", func() error { _, err := f.m.Ensure(ctx, ""); return err }(), errdefs.ErrInvalid, "lowercase"},
		{"import bad name", func() error { _, err := f.m.Import(ctx, "-x", strings.NewReader(""), nil); return err }(), errdefs.ErrInvalid, "lowercase"},
		{"pull bad name", func() error { _, err := f.m.Pull(ctx, "127.0.0.1:1/a/b", "UP", true, nil); return err }(), errdefs.ErrInvalid, "lowercase"},
		{"unknown builtin", func() error { _, err := f.m.Build(ctx, "alpine", false, nil); return err }(), errdefs.ErrInvalid, "busybox, debian"},
		{"ensure unknown", func() error { _, err := f.m.Ensure(ctx, "nope"); return err }(), errdefs.ErrNotFound, "den image pull"},
		{"get unknown", func() error { _, err := f.m.Get(ctx, "nope"); return err }(), errdefs.ErrNotFound, "den image ls"},
		{"remove unknown", f.m.Remove(ctx, "nope"), errdefs.ErrNotFound, "den image ls"},
		{"pull bad ref", func() error { _, err := f.m.Pull(ctx, "not a ref!!", "", false, nil); return err }(), errdefs.ErrInvalid, "docker.io/library/python"},
		{"pull ref without usable name", func() error { _, err := f.m.Pull(ctx, "127.0.0.1:1/___:v1", "", true, nil); return err }(), errdefs.ErrInvalid, "name"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assertClass(t, c.err, c.class)
			if !strings.Contains(errdefs.Hint(c.err), c.hint) {
				t.Errorf("hint %q, want it to mention %q", errdefs.Hint(c.err), c.hint)
			}
		})
	}
	if v := f.pool.volumes(t); len(v) != 0 {
		t.Errorf("volumes left: %v", v)
	}
}

func TestRemove(t *testing.T) {
	needBusybox(t)
	f := newFixture(t)
	ctx := context.Background()
	if _, err := f.m.Build(ctx, "busybox", false, nil); err != nil {
		t.Fatal(err)
	}
	if err := f.m.Remove(ctx, "busybox"); err != nil {
		t.Fatal(err)
	}
	f.assertNothingOf(t, "busybox")
	assertClass(t, f.m.Remove(ctx, "busybox"), errdefs.ErrNotFound)

	// A volume without a record, as a crash mid-build leaves, goes too.
	if _, err := f.pool.Create(ctx, volumeKey("orphan", 1)); err != nil {
		t.Fatal(err)
	}
	if err := f.m.Remove(ctx, "orphan"); err != nil {
		t.Fatal(err)
	}
	f.assertNothingOf(t, "orphan")
}

// TestRebuildKeepsUsedVersions rebuilds an image three times: a version a
// sandbox was made from stays, selectable by number; unused ones go; the
// newest cannot be removed on its own; removing the image removes all.
func TestRebuildKeepsUsedVersions(t *testing.T) {
	needBusybox(t)
	f := newFixture(t)
	ctx := context.Background()
	v1, err := f.m.Build(ctx, "busybox", false, nil)
	if err != nil {
		t.Fatal(err)
	}
	sb := &sandbox.Sandbox{ID: "sb1", Name: "sb1", State: sandbox.StateRunning, Spec: sandbox.Spec{Image: "busybox", ImageVersion: 1}}
	if err := f.records.CreateSandbox(ctx, sb, sandbox.Event{SandboxID: sb.ID, Type: sandbox.EventCreated, To: sandbox.StateRunning}); err != nil {
		t.Fatal(err)
	}
	v2, err := f.m.Build(ctx, "busybox", true, nil)
	if err != nil {
		t.Fatal(err)
	}
	v3, err := f.m.Build(ctx, "busybox", true, nil)
	if err != nil {
		t.Fatal(err)
	}
	if v2.Version != 2 || v3.Version != 3 {
		t.Fatalf("rebuilt versions %d, %d; want 2, 3", v2.Version, v3.Version)
	}
	for _, c := range []struct {
		im   *sandbox.Image
		kept bool
	}{{v1, true}, {v2, false}, {v3, true}} {
		_, err := os.Stat(f.pool.Path(c.im.VolumeKey()))
		if (err == nil) != c.kept {
			t.Errorf("version %d: volume there = %v, want %v", c.im.Version, err == nil, c.kept)
		}
	}
	if got, err := f.m.Version(ctx, "busybox", 1); err != nil || got.Version != 1 {
		t.Errorf("Version(busybox, 1) = %+v, %v", got, err)
	}
	assertClass(t, func() error { _, err := f.m.Version(ctx, "busybox", 2); return err }(), errdefs.ErrNotFound)
	if got, err := f.m.Version(ctx, "busybox", 0); err != nil || got.Version != 3 {
		t.Errorf("Version(busybox, 0) = %+v, %v; want the newest", got, err)
	}
	assertClass(t, f.m.Remove(ctx, "busybox@3"), errdefs.ErrConflict)
	assertClass(t, f.m.Remove(ctx, "busybox@9"), errdefs.ErrNotFound)
	assertClass(t, f.m.Remove(ctx, "busybox@x"), errdefs.ErrInvalid)
	if err := f.m.Remove(ctx, "busybox"); err != nil {
		t.Fatal(err)
	}
	for _, im := range []*sandbox.Image{v1, v3} {
		if _, err := os.Stat(f.pool.Path(im.VolumeKey())); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("version %d left after removing the image (stat: %v)", im.Version, err)
		}
	}
	if older, err := f.m.Versions(ctx, "busybox"); err != nil || len(older) != 0 {
		t.Errorf("older versions after removing the image: %v, %v", older, err)
	}
}

func TestListAndGet(t *testing.T) {
	needBusybox(t)
	f := newFixture(t)
	ctx := context.Background()
	if _, err := f.m.Build(ctx, "busybox", false, nil); err != nil {
		t.Fatal(err)
	}
	ims, err := f.m.List(ctx)
	if err != nil || len(ims) != 1 || ims[0].Name != "busybox" {
		t.Fatalf("list: %v %v", ims, err)
	}
	im, err := f.m.Get(ctx, "busybox")
	if err != nil || im.Source != SourceBuiltin {
		t.Fatalf("get: %+v %v", im, err)
	}
}

func TestNewManagerValidates(t *testing.T) {
	records := newFixture(t).records
	if _, err := NewManager(Config{Records: records}); err == nil || !strings.Contains(err.Error(), "Pool") {
		t.Errorf("no pool: %v", err)
	}
	if _, err := NewManager(Config{Pool: newDirPool(t)}); err == nil || !strings.Contains(err.Error(), "Records") {
		t.Errorf("no records: %v", err)
	}
	if _, err := NewManager(Config{Pool: newDirPool(t), Records: records, MaxImageBytes: -1}); err == nil || !strings.Contains(err.Error(), "MaxImageBytes") {
		t.Errorf("negative cap: %v", err)
	}
}
