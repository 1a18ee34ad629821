// Command dist builds a release of den from what `make build` built: a
// tarball laid out as `make install` lays out a host, a Debian package
// made with nfpm, and the SHA-256 sums of both. `make dist` runs it.
package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// options is one release build.
type options struct {
	bin        string    // dend, den, den-init and the runsc link, as `make build` leaves them
	repo       string    // the checkout: deploy/'s templates
	out        string    // where the release is written
	version    string    // git describe's name of the build, as stamped in the binaries
	date       time.Time // the commit's time: man pages' dates, files' times, snapshots' versions
	maintainer string    // the package's Maintainer field
	man        string    // when set, write only the man pages here (make install's)
}

func main() {
	var o options
	flag.StringVar(&o.bin, "bin", "bin", "the directory `make build` wrote dend, den, den-init and runsc into")
	flag.StringVar(&o.repo, "repo", ".", "the den checkout")
	flag.StringVar(&o.out, "out", "dist", "where the release is written")
	flag.StringVar(&o.version, "version", "", "the release's version, as stamped in the binaries (git describe)")
	flag.StringVar(&o.maintainer, "maintainer", "den developers <den-dev@users.noreply.github.com>", "the Debian package's Maintainer field")
	flag.StringVar(&o.man, "man", "", "write only the man pages, gzipped, into `DIR`/man1 and DIR/man8 (what make install installs)")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := o.fill(os.Getenv("SOURCE_DATE_EPOCH")); err != nil {
		fmt.Fprintln(os.Stderr, "dist:", err)
		os.Exit(2)
	}
	build := run
	if o.man != "" {
		build = writeMan
	}
	if err := build(o, log); err != nil {
		fmt.Fprintln(os.Stderr, "dist:", err)
		os.Exit(1)
	}
}

// fill checks the options and makes their paths absolute; epoch, when
// set, is the release's date in seconds since 1970 (SOURCE_DATE_EPOCH).
func (o *options) fill(epoch string) error {
	if o.version == "" {
		return fmt.Errorf("-version is required: the version stamped in the binaries (make dist passes git describe's)")
	}
	o.date = time.Now().UTC().Truncate(time.Second)
	if epoch != "" {
		n, err := strconv.ParseInt(epoch, 10, 64)
		if err != nil {
			return fmt.Errorf("SOURCE_DATE_EPOCH %q: want seconds since 1970", epoch)
		}
		o.date = time.Unix(n, 0).UTC()
	}
	for _, p := range []*string{&o.bin, &o.repo, &o.out, &o.man} {
		if *p == "" {
			continue // -man unset: a whole release
		}
		abs, err := filepath.Abs(*p)
		if err != nil {
			return fmt.Errorf("resolving %s: %w", *p, err)
		}
		*p = abs
	}
	return nil
}

// run builds the release: the generated files once, then the tarball
// and the package, each from its own layout, then their sums.
func run(o options, log *slog.Logger) error {
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return fmt.Errorf("making %s: %w", o.out, err)
	}
	work, err := os.MkdirTemp(o.out, ".work-")
	if err != nil {
		return fmt.Errorf("making a work directory: %w", err)
	}
	defer os.RemoveAll(work)
	if err := checkStatic(o.bin); err != nil {
		return err
	}
	gen, err := generate(o, filepath.Join(work, "gen"))
	if err != nil {
		return err
	}
	tarFiles, err := tarLayout.files(o, gen, filepath.Join(work, "tar"))
	if err != nil {
		return err
	}
	tgz := filepath.Join(o.out, fmt.Sprintf("den_%s_linux_amd64.tar.gz", tarVersion(o.version)))
	if err := writeTarball(tgz, o.date, tarFiles); err != nil {
		return err
	}
	log.Info("wrote the tarball", "path", tgz)
	debFiles, err := debLayout.files(o, gen, filepath.Join(work, "deb"))
	if err != nil {
		return err
	}
	deb := filepath.Join(o.out, fmt.Sprintf("den_%s_amd64.deb", debVersion(o.version, o.date)))
	if err := writeDeb(deb, o, debFiles, filepath.Join(work, "scripts")); err != nil {
		return err
	}
	log.Info("wrote the Debian package", "path", deb)
	sums := filepath.Join(o.out, "SHA256SUMS")
	if err := writeSums(sums, tgz, deb); err != nil {
		return err
	}
	log.Info("wrote the sums", "path", sums)
	return nil
}

// writeMan writes den's and dend's man pages, as the release ships them,
// into o.man/manN, for `make install`.
func writeMan(o options, log *slog.Logger) error {
	work, err := os.MkdirTemp("", "den-man-")
	if err != nil {
		return fmt.Errorf("making a work directory: %w", err)
	}
	defer os.RemoveAll(work)
	gen, err := generate(o, work)
	if err != nil {
		return err
	}
	if err := placeMan(gen.man, o.man); err != nil {
		return err
	}
	log.Info("wrote the man pages", "dir", o.man, "pages", len(gen.man))
	return nil
}

// placeMan copies gzipped man pages (NAME.SECTION.gz) into dir/manSECTION,
// where man looks for them under a MANDIR.
func placeMan(pages []string, dir string) error {
	for _, page := range pages {
		name := filepath.Base(page)                                  // den.1.gz
		section := filepath.Ext(strings.TrimSuffix(name, ".gz"))[1:] // 1
		sub := filepath.Join(dir, "man"+section)
		if err := os.MkdirAll(sub, 0o755); err != nil {
			return fmt.Errorf("making %s: %w", sub, err)
		}
		b, err := os.ReadFile(page)
		if err != nil {
			return fmt.Errorf("reading %s: %w", page, err)
		}
		if err := os.WriteFile(filepath.Join(sub, name), b, 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", name, err)
		}
	}
	return nil
}
