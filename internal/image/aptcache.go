package image

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// buildPrefix names a build's own directory in the package cache;
// newPrefix, one being made.
const (
	buildPrefix = ".build-"
	newPrefix   = ".new-"
)

// aptCache is the package cache (Config.CacheDir) as one build uses it.
//
// mmdebstrap's sync-in and sync-out copy whole directories with tar, which
// writes each file in place: two builds syncing with one directory would
// read each other's half-written packages, and apt's lock and partial/
// would be copied back and forth. So a build never syncs with the cache
// itself. It gets a directory of its own in it, .build-XXXX, holding a
// lock it keeps for its lifetime; in/ holds hard links to the packages
// the cache has, which sync-in copies into the chroot; out/ receives the
// chroot's packages from sync-out; and keep moves them into the cache,
// each by a rename, so that the cache only ever holds whole packages, and
// nothing but *.deb. Any number of builds, of any number of dends, may
// share a cache.
type aptCache struct {
	dir   string   // the cache: *.deb and builds' directories
	build string   // this build's directory
	lock  *os.File // held while the build runs: its directory is in use
}

// openAptCache makes a build's directory in the cache dir, its in/
// filled with links to the cached packages, after removing what builds
// that ended without closing theirs (a dend killed mid-build) left.
func openAptCache(dir string, log *slog.Logger) (*aptCache, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating the package cache: %w", hostErr(err))
	}
	removeAbandonedBuilds(dir, log)
	// The directory is made under another name, locked, filled, and only
	// then named as a build's, so that no other build takes it for one
	// abandoned.
	tmp, err := os.MkdirTemp(dir, newPrefix)
	if err != nil {
		return nil, fmt.Errorf("creating a build directory in the package cache: %w", hostErr(err))
	}
	c := &aptCache{dir: dir, build: tmp}
	if c.lock, err = lockBuild(tmp, unix.LOCK_EX); err != nil {
		os.RemoveAll(tmp)
		return nil, fmt.Errorf("locking a build directory in the package cache: %w", hostErr(err))
	}
	c.build = filepath.Join(dir, buildPrefix+strings.TrimPrefix(filepath.Base(tmp), newPrefix))
	for _, sub := range []string{filepath.Join(tmp, "in"), filepath.Join(tmp, "out")} {
		if err = os.Mkdir(sub, 0o755); err != nil {
			break
		}
	}
	if err == nil {
		err = os.Rename(tmp, c.build)
	}
	if err != nil {
		os.RemoveAll(tmp)
		c.lock.Close()
		return nil, fmt.Errorf("creating a build directory in the package cache: %w", hostErr(err))
	}
	for _, name := range debs(dir) {
		// A package that cannot be linked is downloaded again.
		_ = os.Link(filepath.Join(dir, name), filepath.Join(c.in(), name))
	}
	return c, nil
}

// in is what sync-in copies into the chroot; out is where sync-out
// copies the chroot's packages.
func (c *aptCache) in() string  { return filepath.Join(c.build, "in") }
func (c *aptCache) out() string { return filepath.Join(c.build, "out") }

// keep moves the packages sync-out copied into the cache, and says how
// many the cache did not have.
func (c *aptCache) keep() (added int, err error) {
	for _, name := range debs(c.out()) {
		dst := filepath.Join(c.dir, name)
		if _, err := os.Lstat(dst); err == nil {
			continue
		}
		if err := os.Rename(filepath.Join(c.out(), name), dst); err != nil {
			return added, fmt.Errorf("keeping %s in the package cache: %w", name, hostErr(err))
		}
		added++
	}
	return added, nil
}

// close removes the build's directory.
func (c *aptCache) close() {
	os.RemoveAll(c.build)
	c.lock.Close()
}

// lockBuild takes how (LOCK_EX, with LOCK_NB to try) on build's lock file.
func lockBuild(build string, how int) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(build, "lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), how); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// removeAbandonedBuilds removes the build directories in dir whose lock
// no build holds, and those a day old that never became one.
func removeAbandonedBuilds(dir string, log *slog.Logger) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		build := filepath.Join(dir, e.Name())
		switch {
		case !e.IsDir():
			continue
		case strings.HasPrefix(e.Name(), newPrefix):
			if info, err := e.Info(); err != nil || time.Since(info.ModTime()) < 24*time.Hour {
				continue
			}
		case strings.HasPrefix(e.Name(), buildPrefix):
			f, err := lockBuild(build, unix.LOCK_EX|unix.LOCK_NB)
			if err != nil {
				continue // a build is running
			}
			defer f.Close()
		default:
			continue
		}
		if err := os.RemoveAll(build); err != nil {
			log.Warn("removing an abandoned build from the package cache", logDir, build, logError, err)
		}
	}
}

// debs are the names of the regular *.deb files in dir.
func debs(dir string) []string {
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		if e.Type().IsRegular() && strings.HasSuffix(e.Name(), ".deb") {
			names = append(names, e.Name())
		}
	}
	return names
}
