package main

import (
	"bytes"
	"compress/gzip"
	"debug/elf"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// file is one file of a release: where its bytes are now and where it
// goes on a host.
type file struct {
	src  string      // on this machine
	dst  string      // absolute path on the host it is installed on
	mode fs.FileMode // its permission bits
	conf bool        // a configuration file: the host's copy is kept
}

// layout is where a release's files go on a host, as `make install`'s
// variables say: PREFIX, the unit's directory and zsh's completions.
type layout struct {
	prefix  string
	unitDir string
	zshDir  string // below PREFIX/share
}

var (
	// tarLayout is `make install`'s: PREFIX /usr/local, the unit in
	// /etc/systemd/system.
	tarLayout = layout{prefix: "/usr/local", unitDir: "/etc/systemd/system", zshDir: "zsh/site-functions"}
	// debLayout is a Debian package's: PREFIX /usr, the unit in
	// /lib/systemd/system (Debian 12's place for packages' units, where
	// /etc/systemd/system is the administrator's), zsh's completions
	// where Debian's zsh looks for packages'.
	debLayout = layout{prefix: "/usr", unitDir: "/lib/systemd/system", zshDir: "zsh/vendor-completions"}
)

// generated is what a release makes from the built binaries.
type generated struct {
	bash, zsh, fish string   // den's completion scripts
	man             []string // gzipped pages, NAME.SECTION.gz
}

// files lists the release's files in layout l, writing the unit and
// dend.env filled with l's paths into dir.
func (l layout) files(o options, gen generated, dir string) ([]file, error) {
	bindir, libdir, share := l.prefix+"/bin", l.prefix+"/lib/den", l.prefix+"/share"
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("making %s: %w", dir, err)
	}
	unit := filepath.Join(dir, "dend.service")
	if err := fill(filepath.Join(o.repo, "deploy/dend.service.in"), unit, "@BINDIR@", bindir, "@SYSCONFDIR@", "/etc"); err != nil {
		return nil, err
	}
	env := filepath.Join(dir, "dend.env")
	if err := fill(filepath.Join(o.repo, "deploy/dend.env.in"), env, "@LIBDIR@", libdir); err != nil {
		return nil, err
	}
	runsc, err := filepath.EvalSymlinks(filepath.Join(o.bin, "runsc"))
	if err != nil {
		return nil, fmt.Errorf("finding the pinned runsc (make setup links it into %s): %w", o.bin, err)
	}
	files := []file{
		{src: filepath.Join(o.bin, "dend"), dst: bindir + "/dend", mode: 0o755},
		{src: filepath.Join(o.bin, "den"), dst: bindir + "/den", mode: 0o755},
		{src: filepath.Join(o.bin, "den-init"), dst: libdir + "/den-init", mode: 0o755},
		{src: runsc, dst: libdir + "/runsc", mode: 0o755},
		{src: unit, dst: l.unitDir + "/dend.service", mode: 0o644},
		{src: env, dst: "/etc/den/dend.env", mode: 0o600, conf: true},
		{src: gen.bash, dst: share + "/bash-completion/completions/den", mode: 0o644},
		{src: gen.zsh, dst: share + "/" + l.zshDir + "/_den", mode: 0o644},
		{src: gen.fish, dst: share + "/fish/vendor_completions.d/den.fish", mode: 0o644},
	}
	for _, m := range gen.man {
		name := filepath.Base(m)
		section := strings.TrimPrefix(path.Ext(strings.TrimSuffix(name, ".gz")), ".")
		files = append(files, file{src: m, dst: share + "/man/man" + section + "/" + name, mode: 0o644})
	}
	for _, f := range files {
		if _, err := os.Stat(f.src); err != nil {
			return nil, fmt.Errorf("a file of the release is missing: %w", err)
		}
	}
	sort.Slice(files, func(i, j int) bool { return files[i].dst < files[j].dst })
	return files, nil
}

var placeholder = regexp.MustCompile(`@[A-Z]+@`)

// fill writes template src to dst with each of pairs' placeholders
// replaced by its value, as `make install`'s sed does.
func fill(src, dst string, pairs ...string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return fmt.Errorf("reading the template %s: %w", src, err)
	}
	b = []byte(strings.NewReplacer(pairs...).Replace(string(b)))
	if p := placeholder.Find(b); p != nil {
		return fmt.Errorf("%s still has the placeholder %s after filling it", src, p)
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", dst, err)
	}
	return nil
}

// generate makes den's completions and man pages and dend's man page
// from the built binaries, into dir.
func generate(o options, dir string) (generated, error) {
	den, dend := filepath.Join(o.bin, "den"), filepath.Join(o.bin, "dend")
	raw := filepath.Join(dir, "raw")
	if err := os.MkdirAll(raw, 0o755); err != nil {
		return generated{}, fmt.Errorf("making %s: %w", raw, err)
	}
	gen := generated{
		bash: filepath.Join(dir, "den.bash"),
		zsh:  filepath.Join(dir, "_den"),
		fish: filepath.Join(dir, "den.fish"),
	}
	for shell, dst := range map[string]string{"bash": gen.bash, "zsh": gen.zsh, "fish": gen.fish} {
		out, err := output(o, den, "completion", shell)
		if err != nil {
			return generated{}, err
		}
		if err := os.WriteFile(dst, out, 0o644); err != nil {
			return generated{}, fmt.Errorf("writing den's %s completions: %w", shell, err)
		}
	}
	if _, err := output(o, den, "generate-man", raw); err != nil {
		return generated{}, err
	}
	help, err := dendHelp(o, dend)
	if err != nil {
		return generated{}, err
	}
	page, err := dendManPage(help, o.version, o.date, filepath.Dir(dend))
	if err != nil {
		return generated{}, err
	}
	if err := os.WriteFile(filepath.Join(raw, "dend.8"), page, 0o644); err != nil {
		return generated{}, fmt.Errorf("writing dend's man page: %w", err)
	}
	gen.man, err = gzipAll(raw, dir, o.date)
	return gen, err
}

// output runs one of the built binaries with a clean environment (no
// DEN_* settings of this machine) and returns what it printed.
func output(o options, name string, args ...string) ([]byte, error) {
	cmd := exec.Command(name, args...)
	cmd.Env = cleanEnv(o)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("running %s %s: %w: %s", filepath.Base(name), strings.Join(args, " "), err, stderr.Bytes())
	}
	return out, nil
}

// dendHelp returns dend --help's text (the flag package prints it on
// stderr and exits 0).
func dendHelp(o options, dend string) (string, error) {
	cmd := exec.Command(dend, "--help")
	cmd.Env = cleanEnv(o)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("running dend --help: %w: %s", err, out)
	}
	return string(out), nil
}

func cleanEnv(o options) []string {
	env := []string{"SOURCE_DATE_EPOCH=" + strconv.FormatInt(o.date.Unix(), 10)}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DEN_") && !strings.HasPrefix(kv, "SOURCE_DATE_EPOCH=") {
			env = append(env, kv)
		}
	}
	return env
}

// gzipAll writes each file of src gzipped into dst (Debian's man pages
// are gzipped; man reads them so anywhere) and returns their paths.
func gzipAll(src, dst string, date time.Time) ([]string, error) {
	entries, err := os.ReadDir(src)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", src, err)
	}
	var paths []string
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("reading a man page: %w", err)
		}
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		zw.ModTime = date
		zw.Write(b)
		if err := zw.Close(); err != nil {
			return nil, fmt.Errorf("compressing %s: %w", e.Name(), err)
		}
		p := filepath.Join(dst, e.Name()+".gz")
		if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
			return nil, fmt.Errorf("writing %s: %w", p, err)
		}
		paths = append(paths, p)
	}
	return paths, nil
}

// checkStatic refuses binaries that need a dynamic loader: a release
// runs on hosts whose libc it does not know, and den-init runs inside
// every image.
func checkStatic(bin string) error {
	for _, name := range []string{"dend", "den", "den-init", "runsc"} {
		p := filepath.Join(bin, name)
		f, err := elf.Open(p)
		if err != nil {
			return fmt.Errorf("reading %s (make build builds it): %w", p, err)
		}
		for _, prog := range f.Progs {
			if prog.Type == elf.PT_INTERP {
				f.Close()
				return fmt.Errorf("%s is dynamically linked: build it with CGO_ENABLED=0, as make build does", name)
			}
		}
		f.Close()
	}
	return nil
}

// tarVersion is the tarball's name for version: without git's "v".
func tarVersion(version string) string { return strings.TrimPrefix(version, "v") }

// debVersion turns git describe's version into a Debian one that sorts
// as releases follow each other: v1.2.3 is 1.2.3, v1.2.3-4-gabc is
// 1.2.3+4.gabc (after 1.2.3), and a build of no tag, abc1234, is
// 0~gitDATE.gabc1234 (before every release, by the commit's date).
func debVersion(version string, date time.Time) string {
	v := strings.TrimPrefix(version, "v")
	if v != "" && v[0] >= '0' && v[0] <= '9' && strings.Contains(v, ".") {
		v = strings.Replace(v, "-", "+", 1)
		return strings.ReplaceAll(v, "-", ".")
	}
	return "0~git" + date.UTC().Format("20060102150405") + ".g" + strings.ReplaceAll(v, "-", ".")
}
