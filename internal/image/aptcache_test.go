package image

import (
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func names(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// A build sees the cache's packages, and nothing else of it, in in/; what
// it downloaded joins the cache whole, and its directory goes at close.
func TestAptCacheBuild(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a_1_amd64.deb"), "a1")
	writeFile(t, filepath.Join(dir, "lock"), "")
	writeFile(t, filepath.Join(dir, "partial", "b_1_amd64.deb"), "half")

	c, err := openAptCache(dir, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if got := names(t, c.in()); !slices.Equal(got, []string{"a_1_amd64.deb"}) {
		t.Errorf("in/ holds %q, want the cached package alone", got)
	}
	// What sync-out copies: every package of the chroot, the cached one
	// included, and apt's own files.
	writeFile(t, filepath.Join(c.out(), "a_1_amd64.deb"), "a1")
	writeFile(t, filepath.Join(c.out(), "c_2_all.deb"), "c2")
	writeFile(t, filepath.Join(c.out(), "lock"), "")
	added, err := c.keep()
	if err != nil || added != 1 {
		t.Fatalf("keep: %d added, %v; want 1", added, err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "c_2_all.deb")); err != nil || string(b) != "c2" {
		t.Errorf("the downloaded package in the cache: %q, %v", b, err)
	}
	c.close()
	if got := names(t, dir); !slices.Equal(got, []string{"a_1_amd64.deb", "c_2_all.deb", "lock", "partial"}) {
		t.Errorf("the cache holds %q after the build", got)
	}
}

// Builds sharing a cache each have their own directory; one that starts
// removes only those no running build holds.
func TestAptCacheSharedBuilds(t *testing.T) {
	dir := t.TempDir()
	log := slog.New(slog.DiscardHandler)
	running, err := openAptCache(dir, log)
	if err != nil {
		t.Fatal(err)
	}
	defer running.close()
	abandoned, err := openAptCache(dir, log)
	if err != nil {
		t.Fatal(err)
	}
	abandoned.lock.Close() // its dend was killed
	stale := filepath.Join(dir, newPrefix+"1")
	young := filepath.Join(dir, newPrefix+"2")
	for _, d := range []string{stale, young} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-25 * time.Hour)
	if err := os.Chtimes(stale, old, old); err != nil {
		t.Fatal(err)
	}

	next, err := openAptCache(dir, log)
	if err != nil {
		t.Fatal(err)
	}
	defer next.close()
	for path, want := range map[string]bool{running.build: true, next.build: true, young: true, abandoned.build: false, stale: false} {
		if _, err := os.Stat(path); (err == nil) != want {
			t.Errorf("%s: exists %v, want %v", filepath.Base(path), err == nil, want)
		}
	}
	// The running build's packages are its own until it keeps them.
	writeFile(t, filepath.Join(running.out(), "d_1_all.deb"), "d1")
	if _, err := os.Stat(filepath.Join(next.in(), "d_1_all.deb")); err == nil {
		t.Error("another build's unkept package is in in/")
	}
	if _, err := running.keep(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "d_1_all.deb")); err != nil {
		t.Errorf("the kept package: %v", err)
	}
}
