package image

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/sandbox"
)

// debianPackages are installed on top of Debian's minbase variant.
const debianPackages = "python3,git,curl,ca-certificates,procps"

func checkDebian() error {
	if _, err := exec.LookPath("mmdebstrap"); err != nil {
		return errdefs.WithHint(errdefs.Unavailable("cannot build the debian image: mmdebstrap is not installed on this host"),
			"install it with `apt-get install mmdebstrap`")
	}
	return nil
}

// fillDebian bootstraps Debian into root with mmdebstrap, then makes it fit
// for a sandbox.
func (m *Manager) fillDebian(ctx context.Context, root string, progress func(Progress)) (*sandbox.Image, error) {
	return m.bootstrapDebian(ctx, root, debianPackages, progress)
}

// bootstrapDebian bootstraps Debian with packages into root, then makes
// it fit for a sandbox.
func (m *Manager) bootstrapDebian(ctx context.Context, root, packages string, progress func(Progress)) (*sandbox.Image, error) {
	if err := m.mmdebstrap(ctx, root, packages, progress); err != nil {
		return nil, err
	}
	// gVisor brings its own /dev; device nodes would only get in the way
	// of copying the image.
	if err := emptyDir(filepath.Join(root, "dev")); err != nil {
		return nil, fmt.Errorf("emptying /dev: %w", hostErr(err))
	}
	if err := makeDirs(root, []dirSpec{{"tmp", 0o1777}}); err != nil {
		return nil, err
	}
	// An empty /tmp becomes an in-memory tmpfs under gVisor: keep a file
	// in it so what sandboxes write there lands on disk.
	files := append(systemFiles(), fileSpec{"tmp/.keep", 0o644, ""})
	if err := writeFiles(root, files); err != nil {
		return nil, err
	}
	return &sandbox.Image{
		Source: SourceBuiltin,
		Ref:    "debian:" + m.cfg.Suite,
		Env:    []string{defaultPath, "LANG=C.UTF-8"},
		Cwd:    "/",
	}, nil
}

// mmdebstrapArgs are the arguments that bootstrap the suite with packages
// into root, taking packages from cache and giving it those downloaded
// when cache is not nil.
func (m *Manager) mmdebstrapArgs(root, packages string, cache *aptCache) []string {
	args := []string{"--variant=minbase", "--include=" + packages, "--format=directory"}
	if os.Geteuid() == 0 {
		// As root, unshare mode still gets a private mount namespace, so
		// nothing mmdebstrap mounts outlives it, even when it is killed.
		args = append(args, "--mode=unshare")
	}
	if cache != nil {
		args = append(args,
			"--skip=essential/unlink",
			`--setup-hook=mkdir -p "$1"/var/cache/apt/archives/`,
			"--setup-hook=sync-in "+cache.in()+" /var/cache/apt/archives/",
			"--customize-hook=sync-out /var/cache/apt/archives "+cache.out(),
		)
	}
	return append(args, m.cfg.Suite, root, m.cfg.Mirror)
}

func (m *Manager) mmdebstrap(ctx context.Context, root, packages string, progress func(Progress)) error {
	var cache *aptCache
	if dir := m.cfg.CacheDir; dir != "" {
		var err error
		if cache, err = openAptCache(dir, m.log); err != nil {
			return err
		}
		defer cache.close()
	}
	if err := m.runMmdebstrap(ctx, m.mmdebstrapArgs(root, packages, cache), progress, root); err != nil {
		return err
	}
	if cache != nil {
		added, err := cache.keep()
		if err != nil {
			// The image is whole; the next build downloads again.
			m.log.Warn("keeping downloaded packages", logDir, m.cfg.CacheDir, logError, err)
		}
		m.log.Debug("package cache", logDir, m.cfg.CacheDir, logCount, added)
	}
	return nil
}

// runMmdebstrap runs mmdebstrap with args, its output lines as progress.
func (m *Manager) runMmdebstrap(ctx context.Context, args []string, progress func(Progress), root string) error {
	cmd := exec.CommandContext(ctx, "mmdebstrap", args...)
	privateMounts(cmd)
	// Let mmdebstrap clean up after itself before it is killed.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 30 * time.Second
	cmd.Stdout = io.Discard
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting mmdebstrap: %w", err)
	}
	tail := &lastLines{n: 5}
	sc := bufio.NewScanner(stderr)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	sc.Split(scanLinesCR)
	for sc.Scan() {
		line := strings.ReplaceAll(strings.TrimSpace(sc.Text()), root, "<rootfs>")
		if line == "" {
			continue
		}
		tail.add(line)
		progress(Progress{Phase: "bootstrap", Message: line})
	}
	_, _ = io.Copy(io.Discard, stderr)
	if err := cmd.Wait(); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return errdefs.WithHint(errdefs.Unavailable("mmdebstrap failed (%v): %s", err, tail),
			"check that the Debian mirror "+m.cfg.Mirror+" is reachable")
	}
	return nil
}

// privateMounts runs cmd, as root, in a mount namespace of its own whose
// mounts propagate nowhere. mmdebstrap's unshare mode makes a namespace
// but keeps the host's propagation: under systemd, where / is shared, its
// unmount of the /sys it bound into the chroot unmounted the host's
// /sys/fs/cgroup too, and neither runsc nor systemd could make a cgroup
// after it. Go makes / private, recursively, in a namespace it unshares.
func privateMounts(cmd *exec.Cmd) {
	if os.Geteuid() != 0 {
		return
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Unshareflags |= syscall.CLONE_NEWNS
}

// scanLinesCR splits on \n and on \r, which progress output uses.
func scanLinesCR(data []byte, atEOF bool) (int, []byte, error) {
	if i := bytes.IndexAny(data, "\r\n"); i >= 0 {
		return i + 1, data[:i], nil
	}
	if atEOF && len(data) > 0 {
		return len(data), data, nil
	}
	return 0, nil, nil
}

// emptyDir removes everything in dir, never following symlinks.
func emptyDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return os.Mkdir(dir, 0o755)
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// mirrorFromSources finds the Debian mirror the host's apt uses for suite
// in aptDir (deb822 debian.sources first, then the one-line sources.list),
// or DefaultMirror.
func mirrorFromSources(aptDir, suite string) string {
	if b, err := os.ReadFile(filepath.Join(aptDir, "sources.list.d", "debian.sources")); err == nil {
		if uri := mirrorFromDeb822(string(b), suite); uri != "" {
			return uri
		}
	}
	if b, err := os.ReadFile(filepath.Join(aptDir, "sources.list")); err == nil {
		if uri := mirrorFromOneLine(string(b), suite); uri != "" {
			return uri
		}
	}
	return DefaultMirror
}

// source is one apt source: its URI and suites.
type source struct {
	uri    string
	suites []string
}

// pickMirror prefers a source for suite itself, then any source that is
// not a security archive; only http(s) mirrors qualify.
func pickMirror(sources []source, suite string) string {
	var fallback string
	for _, s := range sources {
		if !strings.HasPrefix(s.uri, "http://") && !strings.HasPrefix(s.uri, "https://") {
			continue
		}
		for _, su := range s.suites {
			if su == suite {
				return s.uri
			}
			if fallback == "" && !strings.Contains(su, "security") && !strings.Contains(s.uri, "security") {
				fallback = s.uri
			}
		}
	}
	return fallback
}

func mirrorFromDeb822(text, suite string) string {
	var sources []source
	for _, stanza := range strings.Split(text, "\n\n") {
		fields := map[string]string{}
		for _, line := range strings.Split(stanza, "\n") {
			if strings.HasPrefix(line, "#") {
				continue
			}
			if k, v, ok := strings.Cut(line, ":"); ok && !strings.HasPrefix(line, " ") {
				fields[strings.ToLower(strings.TrimSpace(k))] = strings.TrimSpace(v)
			}
		}
		if !hasWord(fields["types"], "deb") || strings.EqualFold(fields["enabled"], "no") {
			continue
		}
		for _, uri := range strings.Fields(fields["uris"]) {
			sources = append(sources, source{uri: uri, suites: strings.Fields(fields["suites"])})
		}
	}
	return pickMirror(sources, suite)
}

func mirrorFromOneLine(text, suite string) string {
	var sources []source
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || f[0] != "deb" {
			continue
		}
		f = f[1:]
		if strings.HasPrefix(f[0], "[") { // options
			for len(f) > 0 && !strings.HasSuffix(f[0], "]") {
				f = f[1:]
			}
			if len(f) > 0 {
				f = f[1:]
			}
		}
		if len(f) >= 2 {
			sources = append(sources, source{uri: f[0], suites: []string{f[1]}})
		}
	}
	return pickMirror(sources, suite)
}

func hasWord(s, w string) bool {
	for _, f := range strings.Fields(s) {
		if f == w {
			return true
		}
	}
	return false
}
