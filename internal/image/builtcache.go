package image

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/den-dev/den/internal/sandbox"
)

// builtDir is the directory of the package cache (Config.CacheDir) that
// keeps the images builds made.
const builtDir = "built"

// Files of a kept image.
const (
	builtRoot = "rootfs"
	builtMeta = "image.json"
)

// A built-in image made from the Debian archive takes minutes to build,
// most of it installing packages, and comes out the same every time the
// archive and the recipe are: so a build keeps what it made in the
// package cache, built/NAME/KEY/, and the next build of NAME with the
// same KEY copies it instead, whichever dend of those sharing the cache
// runs it. KEY (archiveKey) names everything the result depends on: the
// recipe's packages, the suite, the mirror and its signed index of the
// suite (InRelease, which changes whenever a package does), mmdebstrap's
// version and den's own executable. --force builds from scratch and
// keeps the new image in place of the old. Only the newest image of each
// name is kept. One build of a name at a time holds built/NAME.lock, so
// that dends sharing a cache build a name once, the others waiting.

// builtImage is what a kept image records besides its files.
type builtImage struct {
	Source string   `json:"source"`
	Ref    string   `json:"ref"`
	Env    []string `json:"env"`
	Cwd    string   `json:"cwd"`
	User   string   `json:"user"`
}

// fillKept fills root with the built-in image name: a copy of the one
// kept for the same key, else what r builds, which is then kept.
func (m *Manager) fillKept(ctx context.Context, name string, r recipe, force bool, root string, progress func(Progress)) (*sandbox.Image, error) {
	if m.cfg.CacheDir == "" || r.key == nil {
		return r.fill(ctx, root, progress)
	}
	key, err := r.key(ctx)
	if err != nil {
		m.log.Warn("building without the image cache", logImage, name, logError, err)
		return r.fill(ctx, root, progress)
	}
	dir := filepath.Join(m.cfg.CacheDir, builtDir, name)
	unlock, err := lockKept(ctx, dir, func() {
		progress(Progress{Phase: "cache", Message: "waiting for another build of " + name + " sharing the image cache"})
	})
	if err != nil {
		return nil, fmt.Errorf("locking the image cache: %w", err)
	}
	defer unlock()
	entry := filepath.Join(dir, key)
	if !force {
		if im, ok := m.restoreKept(ctx, name, entry, root, progress); ok {
			return im, nil
		}
	}
	im, err := r.fill(ctx, root, progress)
	if err != nil {
		return nil, err
	}
	if err := keep(ctx, dir, key, root, im); err != nil {
		// The image is whole; the next build builds again.
		m.log.Warn("keeping the built image", logImage, name, logDir, m.cfg.CacheDir, logError, err)
	}
	return im, nil
}

// restoreKept copies the image kept in entry into root, reporting
// whether it did. A kept image that cannot be copied is removed, and root
// left empty for a build.
func (m *Manager) restoreKept(ctx context.Context, name, entry, root string, progress func(Progress)) (*sandbox.Image, bool) {
	b, err := os.ReadFile(filepath.Join(entry, builtMeta))
	if err != nil {
		return nil, false // none kept, or only half of one
	}
	var bi builtImage
	if err := json.Unmarshal(b, &bi); err != nil {
		m.log.Warn("removing a damaged image from the image cache", logImage, name, logError, err)
		os.RemoveAll(entry)
		return nil, false
	}
	progress(Progress{Phase: "cache", Message: "copying the image built earlier from the same packages"})
	if err := copyTree(ctx, filepath.Join(entry, builtRoot), root); err != nil {
		if ctx.Err() == nil {
			m.log.Warn("removing an image the image cache could not copy", logImage, name, logError, err)
			os.RemoveAll(entry)
		}
		_ = emptyDir(root)
		return nil, false
	}
	m.log.Info("image copied from the image cache", logImage, name, logDir, m.cfg.CacheDir)
	return &sandbox.Image{Source: bi.Source, Ref: bi.Ref, Env: bi.Env, Cwd: bi.Cwd, User: bi.User}, true
}

// keep copies the image im in root into dir as key's, in place of any
// image kept before.
func keep(ctx context.Context, dir, key, root string, im *sandbox.Image) error {
	tmp, err := os.MkdirTemp(dir, newPrefix)
	if err != nil {
		return hostErr(err)
	}
	defer os.RemoveAll(tmp) // after the rename, a no-op
	if err := copyTree(ctx, root, filepath.Join(tmp, builtRoot)); err != nil {
		return err
	}
	b, err := json.Marshal(builtImage{Source: im.Source, Ref: im.Ref, Env: im.Env, Cwd: im.Cwd, User: im.User})
	if err != nil {
		return err
	}
	// The record is written last: an entry without it is no image.
	if err := os.WriteFile(filepath.Join(tmp, builtMeta), b, 0o644); err != nil {
		return hostErr(err)
	}
	if err := syncFS(tmp); err != nil {
		return hostErr(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return hostErr(err)
	}
	for _, e := range entries {
		if p := filepath.Join(dir, e.Name()); p != tmp {
			if err := os.RemoveAll(p); err != nil {
				return hostErr(err)
			}
		}
	}
	return hostErr(os.Rename(tmp, filepath.Join(dir, key)))
}

// lockKept takes dir's lock for one build, creating dir, and calls
// waiting once if another build holds it.
func lockKept(ctx context.Context, dir string, waiting func()) (unlock func(), err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, hostErr(err)
	}
	f, err := os.OpenFile(dir+".lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, hostErr(err)
	}
	for told := false; ; told = true {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if err != unix.EWOULDBLOCK {
			f.Close()
			return nil, err
		}
		if !told {
			waiting()
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// copyTree copies the directory src into dst, made if need be, keeping
// modes, owners, times, links and extended attributes.
func copyTree(ctx context.Context, src, dst string) error {
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, "cp", "-a", "--reflink=auto", "--one-file-system", "--no-target-directory", src, dst)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		line, _, _ := strings.Cut(strings.TrimSpace(out.String()), "\n")
		return fmt.Errorf("copying the image: %w: %s", err, line)
	}
	return nil
}

// archiveKey names what a Debian build of name with packages depends on:
// see fillKept.
func (m *Manager) archiveKey(ctx context.Context, name, packages string) (string, error) {
	release, err := m.fetchInRelease(ctx)
	if err != nil {
		return "", err
	}
	tool, err := exec.CommandContext(ctx, "mmdebstrap", "--version").Output()
	if err != nil {
		return "", fmt.Errorf("asking mmdebstrap its version: %w", err)
	}
	self, err := m.self()
	if err != nil {
		return "", fmt.Errorf("reading den's executable: %w", hostErr(err))
	}
	h := sha256.New()
	for _, part := range [][]byte{[]byte(name), []byte(packages), []byte(m.cfg.Suite), []byte(m.cfg.Mirror), release, tool, self} {
		fmt.Fprintf(h, "%d:", len(part))
		h.Write(part)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// fetchInRelease reads the mirror's signed index of the suite.
func (m *Manager) fetchInRelease(ctx context.Context) ([]byte, error) {
	url := strings.TrimSuffix(m.cfg.Mirror, "/") + "/dists/" + m.cfg.Suite + "/InRelease"
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("reading the suite's index %s: %w", url, err)
	}
	resp, err := m.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("reading the suite's index: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("reading the suite's index %s: %s", url, resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("reading the suite's index %s: %w", url, err)
	}
	return b, nil
}

// executableSHA256 is the SHA-256 of the running program.
func executableSHA256() ([]byte, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	f, err := os.Open(exe)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return nil, err
	}
	return h.Sum(nil), nil
}
