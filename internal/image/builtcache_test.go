package image

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/den-dev/den/internal/sandbox"
)

// fakeRecipe builds a small tree, counting its builds, under whatever
// key *key holds (an error when it is empty).
func fakeRecipe(builds *atomic.Int32, key *string) recipe {
	return recipe{
		check: func() error { return nil },
		fill: func(ctx context.Context, root string, progress func(Progress)) (*sandbox.Image, error) {
			builds.Add(1)
			if err := makeDirs(root, []dirSpec{{"etc", 0o755}, {"home/user", 0o750}, {"tmp", 0o1777}, {"usr/local/bin", 0o755}}); err != nil {
				return nil, err
			}
			if err := writeFiles(root, []fileSpec{{"etc/os-release", 0o644, "fake\n"}, {"home/user/.bashrc", 0o600, "# rc\n"}}); err != nil {
				return nil, err
			}
			if err := os.Lchown(filepath.Join(root, "home/user"), e2bUID, e2bUID); err != nil {
				return nil, err
			}
			if err := os.Symlink("/den/init", filepath.Join(root, sudoPath)); err != nil {
				return nil, err
			}
			return &sandbox.Image{Source: SourceBuiltin, Ref: "fake:1", Env: []string{defaultPath}, Cwd: e2bHome, User: e2bUser}, nil
		},
		key: func(context.Context) (string, error) {
			if *key == "" {
				return "", errors.New("no index")
			}
			return *key, nil
		},
	}
}

// Dends sharing an image cache build an image once for one key: the
// others get a copy of its files and configuration; --force and a new key
// build again, and only the newest image is kept.
func TestImageCacheBuildsOncePerKey(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the images hold files of another owner")
	}
	cache := t.TempDir()
	withCache := func(c *Config) { c.CacheDir = cache }
	var builds atomic.Int32
	key := "k1"
	r := fakeRecipe(&builds, &key)
	ctx := context.Background()
	build := func(f *fixture, force bool) (*sandbox.Image, []Progress) {
		t.Helper()
		var seen []Progress
		im, err := f.m.build(ctx, "fake", r, force, func(p Progress) { seen = append(seen, p) })
		if err != nil {
			t.Fatal(err)
		}
		return im, seen
	}

	a := newFixture(t, withCache)
	first, _ := build(a, false)
	b := newFixture(t, withCache)
	second, seen := build(b, false)
	if n := builds.Load(); n != 1 {
		t.Fatalf("two dends sharing a cache built %d times, want once", n)
	}
	if !slices.ContainsFunc(seen, func(p Progress) bool { return p.Phase == "cache" }) {
		t.Errorf("the copy reported no cache progress: %+v", seen)
	}
	want, got := tree(t, a.pool.Path(first.VolumeKey())), tree(t, b.pool.Path(second.VolumeKey()))
	if !maps.Equal(got, want) {
		t.Errorf("copied image\n%v\nwant the built one\n%v", got, want)
	}
	var st syscall.Stat_t
	if err := syscall.Lstat(filepath.Join(b.pool.Path(second.VolumeKey()), "home/user"), &st); err != nil || st.Uid != e2bUID {
		t.Errorf("copied /home/user: owner %d (%v), want %d", st.Uid, err, e2bUID)
	}
	if second.Source != SourceBuiltin || second.Ref != "fake:1" || second.User != e2bUser || second.Cwd != e2bHome || !slices.Equal(second.Env, []string{defaultPath}) {
		t.Errorf("copied image %+v, want the configuration of %+v", second, first)
	}

	if _, _ = build(b, true); builds.Load() != 2 {
		t.Errorf("--force built %d times in all, want 2", builds.Load())
	}
	key = "k2"
	c := newFixture(t, withCache)
	if _, _ = build(c, false); builds.Load() != 3 {
		t.Errorf("a new key built %d times in all, want 3", builds.Load())
	}
	kept, _ := os.ReadDir(filepath.Join(cache, builtDir, "fake"))
	if len(kept) != 1 || kept[0].Name() != "k2" {
		t.Errorf("kept %v, want only k2", kept)
	}
	key = "" // the index cannot be read: build, and keep nothing
	d := newFixture(t, withCache)
	if _, _ = build(d, false); builds.Load() != 4 {
		t.Errorf("without a key built %d times in all, want 4", builds.Load())
	}
}

// The key changes with the suite's index and the packages, not otherwise;
// without the index there is none.
func TestArchiveKey(t *testing.T) {
	if _, err := exec.LookPath("mmdebstrap"); err != nil {
		t.Skip("mmdebstrap is not installed")
	}
	var release atomic.Value
	release.Store("Date: Sat, 17 May 2025\n")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/debian/dists/bookworm/InRelease" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte(release.Load().(string)))
	}))
	defer srv.Close()
	f := newFixture(t, func(c *Config) { c.Mirror = srv.URL + "/debian/" })
	ctx := context.Background()
	key := func(name, packages string) string {
		t.Helper()
		k, err := f.m.archiveKey(ctx, name, packages)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	k1 := key("debian", debianPackages)
	if again := key("debian", debianPackages); again != k1 {
		t.Errorf("same archive: key %s, then %s", k1, again)
	}
	if other := key("e2b-base", e2bBasePackages); other == k1 {
		t.Error("other packages: same key")
	}
	release.Store("Date: Sat, 21 Jun 2025\n")
	if later := key("debian", debianPackages); later == k1 {
		t.Error("a new index of the suite: same key")
	}
	g := newFixture(t, func(c *Config) { c.Mirror = srv.URL + "/elsewhere"; c.Suite = "bookworm" })
	if k, err := g.m.archiveKey(ctx, "debian", debianPackages); err == nil {
		t.Errorf("no index: key %s, want an error", k)
	}
}
