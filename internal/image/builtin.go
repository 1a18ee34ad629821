package image

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/sandbox"
	"github.com/den-dev/den/internal/specs"
)

// defaultPath is the PATH of the built-in images, and of imported ones
// that set none.
const defaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// A recipe builds a built-in image.
type recipe struct {
	// check says whether this host can build the image, before anything
	// is touched.
	check func() error
	// fill writes the image into root, an empty directory.
	fill func(ctx context.Context, root string, progress func(Progress)) (*sandbox.Image, error)
	// key, if set, names everything fill's result depends on, for the
	// image cache (builtcache.go); without it every build builds.
	key func(ctx context.Context) (string, error)
}

func (m *Manager) builtin(name string) (recipe, bool) {
	switch name {
	case "busybox":
		return recipe{check: m.checkBusybox, fill: m.fillBusybox}, true
	case "debian":
		return recipe{check: checkDebian, fill: m.fillDebian, key: func(ctx context.Context) (string, error) {
			return m.archiveKey(ctx, name, debianPackages)
		}}, true
	case "e2b-base":
		return recipe{check: checkDebian, fill: m.fillE2BBase, key: func(ctx context.Context) (string, error) {
			return m.archiveKey(ctx, name, e2bBasePackages)
		}}, true
	}
	return recipe{}, false
}

// BuiltinNames lists the images Build knows how to make.
func BuiltinNames() []string { return []string{"busybox", "debian", "e2b-base"} }

// Build makes the built-in image name. When it exists already it is
// returned as it is, unless force is set: then it is built again as its
// next version (a failed rebuild leaves the old version as it was;
// sandboxes made from the old one keep their copies, and `den rebase`
// moves them to the new one). Concurrent builds of one name build once.
// A Debian image is copied from the image cache when one built from the
// same recipe and archive is kept there (builtcache.go); force builds
// from scratch.
// progress, if not nil, is called as the build goes.
func (m *Manager) Build(ctx context.Context, name string, force bool, progress func(Progress)) (*sandbox.Image, error) {
	if err := specs.ValidateName("image", name); err != nil {
		return nil, err
	}
	r, ok := m.builtin(name)
	if !ok {
		err := errdefs.Invalid("%q is not a built-in image", name)
		return nil, errdefs.WithHint(err, fmt.Sprintf("built-in images are %s; other images come from `den image pull` or `den image import`", strings.Join(BuiltinNames(), ", ")))
	}
	if progress == nil {
		progress = func(Progress) {}
	}
	key := name
	if force {
		key = "force:" + name
	}
	return m.shared(ctx, key, func() (*sandbox.Image, error) {
		return m.build(ctx, name, r, force, progress)
	})
}

func (m *Manager) build(ctx context.Context, name string, r recipe, force bool, progress func(Progress)) (*sandbox.Image, error) {
	unlock, err := m.locks.lock(ctx, name)
	if err != nil {
		return nil, err
	}
	defer unlock()
	old, err := m.cfg.Records.GetImage(ctx, name)
	if err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		return nil, fmt.Errorf("looking up image %q: %w", name, err)
	}
	// Without its files here the record is another node's of the fleet:
	// the build here records the next version.
	if old != nil && !force && m.here(old) {
		return old, nil
	}
	if err := r.check(); err != nil {
		return nil, err
	}
	m.log.Info("building image", logImage, name)
	im, err := m.install(ctx, name, func(ctx context.Context, root string) (*sandbox.Image, error) {
		return m.fillKept(ctx, name, r, force, root, progress)
	})
	if err != nil {
		return nil, fmt.Errorf("building image %q: %w", name, err)
	}
	return im, nil
}

func (m *Manager) checkBusybox() error {
	if _, err := os.Stat(m.cfg.Busybox); err != nil {
		return errdefs.WithHint(errdefs.Unavailable("cannot build the busybox image: busybox is not installed on this host"),
			"install it with `apt-get install busybox-static`")
	}
	return nil
}

// fillBusybox makes the tiny test image: the host's static busybox with a
// link per applet and the few files a shell expects.
func (m *Manager) fillBusybox(ctx context.Context, root string, progress func(Progress)) (*sandbox.Image, error) {
	applets, err := busyboxApplets(ctx, m.cfg.Busybox)
	if err != nil {
		return nil, err
	}
	progress(Progress{Phase: "busybox", Message: fmt.Sprintf("linking %d applets", len(applets))})
	dirs := []dirSpec{
		{"bin", 0o755}, {"sbin", 0o755}, {"usr", 0o755}, {"usr/bin", 0o755}, {"usr/sbin", 0o755},
		{"etc", 0o755}, {"root", 0o700}, {"home", 0o755}, {"tmp", 0o1777}, {"var", 0o755},
		{"var/tmp", 0o1777}, {"proc", 0o555}, {"sys", 0o555}, {"dev", 0o755},
	}
	if err := makeDirs(root, dirs); err != nil {
		return nil, err
	}
	if err := copyFile(m.cfg.Busybox, filepath.Join(root, "bin", "busybox"), 0o755); err != nil {
		return nil, fmt.Errorf("copying busybox: %w", hostErr(err))
	}
	for _, a := range applets {
		err := os.Symlink("busybox", filepath.Join(root, "bin", a))
		if err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("linking applet %q: %w", a, hostErr(err))
		}
	}
	files := append(systemFiles(), []fileSpec{
		{"bin/wget", 0o755, busyboxWget},
		{"etc/passwd", 0o644, "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"},
		{"etc/group", 0o644, "root:x:0:\nnogroup:x:65534:\n"},
		{"tmp/.keep", 0o644, ""},
	}...)
	if err := writeFiles(root, files); err != nil {
		return nil, err
	}
	return &sandbox.Image{Source: SourceBuiltin, Ref: "busybox", Env: []string{defaultPath}, Cwd: "/"}, nil
}

// busyboxApplets asks busybox which applets it has, leaving out any name
// that is not a plain file name, and busybox itself.
func busyboxApplets(ctx context.Context, bin string) ([]string, error) {
	out, err := exec.CommandContext(ctx, bin, "--list").Output()
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("listing busybox applets: %w", err)
	}
	var applets []string
	for _, a := range strings.Fields(string(out)) {
		if a == "busybox" || a == "." || a == ".." || strings.ContainsRune(a, '/') {
			continue
		}
		applets = append(applets, a)
	}
	sort.Strings(applets)
	return applets, nil
}

// busyboxWget stands in for the wget applet. Debian's static busybox is
// built without wget's timeout feature, and its option parser then
// writes -T's value through a null pointer: `wget -T 5 URL` dies with
// SIGSEGV (on any host, gVisor or not). This runs wget under timeout(1)
// instead, so -T N (-TN, --timeout=N, --timeout N) bounds the whole
// transfer to N seconds rather than each read; every other argument is
// passed on unchanged. busybox's shell runs its own applets before
// looking in PATH, so `sh -c 'wget -T ...'` still meets the crash: the
// docs say so (docs/cli.md, Images).
const busyboxWget = `#!/bin/sh
# den: wget of this busybox crashes on -T; see den's README (Images).
t=
n=$#
while [ "$n" -gt 0 ]; do
	a=$1; shift; n=$((n - 1))
	case $a in
	--) set -- "$@" --; while [ "$n" -gt 0 ]; do set -- "$@" "$1"; shift; n=$((n - 1)); done ;;
	-T|--timeout) t=$1; shift; n=$((n - 1)) ;;
	--timeout=*) t=${a#--timeout=} ;;
	-T*) t=${a#-T} ;;
	*) set -- "$@" "$a" ;;
	esac
done
if [ -n "$t" ]; then
	exec /bin/busybox timeout "$t" /bin/busybox wget "$@"
fi
exec /bin/busybox wget "$@"
`

type dirSpec struct {
	path string
	mode os.FileMode
}

type fileSpec struct {
	path    string
	mode    os.FileMode
	content string
}

// systemFiles are the files den writes into the built-in images: a
// neutral host name and hosts file, and an empty resolv.conf that the
// sandbox's network setup fills in.
func systemFiles() []fileSpec {
	return []fileSpec{
		{"etc/hostname", 0o644, "localhost\n"},
		{"etc/hosts", 0o644, "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"},
		{"etc/resolv.conf", 0o644, ""},
	}
}

// makeDirs creates dirs under root with exactly their modes.
func makeDirs(root string, dirs []dirSpec) error {
	for _, d := range dirs {
		p := filepath.Join(root, d.path)
		if err := os.MkdirAll(p, 0o755); err != nil {
			return fmt.Errorf("creating /%s: %w", d.path, hostErr(err))
		}
		// Chmod, unlike Mkdir, is not subject to the umask.
		if err := os.Chmod(p, d.mode|modeExtra(d.mode)); err != nil {
			return fmt.Errorf("creating /%s: %w", d.path, hostErr(err))
		}
	}
	return nil
}

// modeExtra turns the Unix sticky, set-id bits in m into their os flags.
func modeExtra(m os.FileMode) os.FileMode {
	var extra os.FileMode
	if m&0o1000 != 0 {
		extra |= os.ModeSticky
	}
	if m&0o2000 != 0 {
		extra |= os.ModeSetgid
	}
	if m&0o4000 != 0 {
		extra |= os.ModeSetuid
	}
	return extra
}

// writeFiles replaces each file under root, never following a symlink the
// image may have in its place.
func writeFiles(root string, files []fileSpec) error {
	for _, f := range files {
		p := filepath.Join(root, f.path)
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("writing /%s: %w", f.path, hostErr(err))
		}
		if err := os.WriteFile(p, []byte(f.content), f.mode); err != nil {
			return fmt.Errorf("writing /%s: %w", f.path, hostErr(err))
		}
		if err := os.Chmod(p, f.mode); err != nil {
			return fmt.Errorf("writing /%s: %w", f.path, hostErr(err))
		}
	}
	return nil
}

func copyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Chmod(dst, mode)
}

// lastLines keeps the last n lines written to it, for error messages.
type lastLines struct {
	n     int
	lines []string
}

func (l *lastLines) add(s string) {
	if len(l.lines) == l.n {
		l.lines = l.lines[1:]
	}
	l.lines = append(l.lines, s)
}

func (l *lastLines) String() string {
	var b bytes.Buffer
	for i, s := range l.lines {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(s)
	}
	return b.String()
}
