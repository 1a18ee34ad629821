// Command shard runs den's integration tests as concurrent shards: it
// compiles the test binary once, lists its tests, splits them into N
// shards balanced by how long each took before (integration/durations.txt),
// runs the shards at once, each test binary in its own process, and then
// the tests that must run alone (integration/shards.txt). Each shard's
// go test -v output is kept in a file; the summary names every failing
// test, and the exit status is 1 if any failed.
//
//	go run -C tools/shard . -dir "$PWD" -shards 2 [-- GO TEST FLAGS]
//	go run -C tools/shard . -dir "$PWD" -refresh LOG...   # durations from -v logs
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

type config struct {
	dir        string // the repository
	pkg        string // the integration package, relative to dir
	shards     int
	timeout    string
	out        string
	rules      string
	durations  string
	def        time.Duration
	dryRun     bool
	serialOnly bool
	refresh    bool
	imageCache string // DEN_TEST_IMAGE_CACHE for every test binary; "" leaves it as it is
}

func main() {
	var c config
	fs := flag.NewFlagSet("shard", flag.ContinueOnError)
	fs.StringVar(&c.dir, "dir", "../..", "the repository's root")
	fs.StringVar(&c.pkg, "pkg", "integration", "the integration tests' package directory, under -dir")
	fs.IntVar(&c.shards, "shards", 2, "how many test binaries run at once")
	fs.StringVar(&c.timeout, "timeout", "80m", "each test binary's -test.timeout (a hang's limit, not a budget)")
	fs.StringVar(&c.out, "out", "", "directory for the test binary and each shard's log (default: a new temporary one)")
	fs.StringVar(&c.rules, "rules", "shards.txt", "which tests run alone or together, under the package directory")
	fs.StringVar(&c.durations, "durations", "durations.txt", "seconds each test took, under the package directory")
	fs.DurationVar(&c.def, "default", 20*time.Second, "the duration assumed for a test the durations file lacks")
	fs.BoolVar(&c.dryRun, "n", false, "print the shards and the serial tests, run nothing")
	fs.BoolVar(&c.serialOnly, "serial", false, "run only the tests that run alone after the shards")
	fs.BoolVar(&c.refresh, "refresh", false, "write the durations file from the go test -v logs given as arguments, and exit")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: shard [flags] [-- go test flags]\n       shard -refresh LOG...\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	var err error
	if c.refresh {
		err = refresh(c, fs.Args())
	} else {
		err = run(c, fs.Args())
	}
	if errors.Is(err, errFailed) {
		os.Exit(1)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "shard:", err)
		os.Exit(2)
	}
}

var errFailed = errors.New("tests failed")

// refresh merges the results of logs into the durations file.
func refresh(c config, logs []string) error {
	if len(logs) == 0 {
		return errors.New("-refresh needs go test -v logs as arguments, e.g. the shard-*.log of a run")
	}
	file := filepath.Join(c.dir, c.pkg, c.durations)
	durs := map[string]time.Duration{}
	for _, f := range append([]string{file}, logs...) {
		b, err := os.ReadFile(f)
		if err != nil && !(f == file && errors.Is(err, os.ErrNotExist)) {
			return fmt.Errorf("reading durations: %w", err)
		}
		if err := parseDurations(bytes.NewReader(b), durs); err != nil {
			return fmt.Errorf("reading durations from %s: %w", f, err)
		}
	}
	var buf bytes.Buffer
	if err := writeDurations(&buf, durs); err != nil {
		return err
	}
	if err := os.WriteFile(file, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("writing durations: %w", err)
	}
	fmt.Printf("shard: %d tests' durations in %s\n", len(durs), file)
	return nil
}

// run builds, lists, plans and runs the shards, then the serial tests.
func run(c config, goFlags []string) error {
	f, err := splitFlags(goFlags)
	if err != nil {
		return err
	}
	if f.timeout != "" {
		c.timeout = f.timeout
	}
	if c.shards < 1 {
		return fmt.Errorf("-shards %d: want at least 1", c.shards)
	}
	if c.out == "" {
		if c.out, err = os.MkdirTemp("", "den-shards-"); err != nil {
			return fmt.Errorf("making the shards' directory: %w", err)
		}
	} else if err := os.MkdirAll(c.out, 0o755); err != nil {
		return fmt.Errorf("making the shards' directory: %w", err)
	}
	// The last run's logs go: -refresh reads every shard-*.log there.
	old, _ := filepath.Glob(filepath.Join(c.out, "shard-*.log"))
	for _, f := range old {
		os.Remove(f)
	}
	if c.out, err = filepath.Abs(c.out); err != nil {
		return err
	}
	pkgDir := filepath.Join(c.dir, c.pkg)
	bin := filepath.Join(c.out, "integration.test")
	build := exec.Command("go", append(append([]string{"test", "-c", "-o", bin}, f.build...), "./"+c.pkg+"/")...)
	build.Dir, build.Stdout, build.Stderr = c.dir, os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("building the integration tests: %w", err)
	}
	tests, err := listTests(bin, pkgDir, f.top)
	if err != nil {
		return err
	}
	rs, durs, err := loadPlanFiles(pkgDir, c)
	if err != nil {
		return err
	}
	shards, serial := plan(tests, c.shards, rs, durs, c.def)
	if c.serialOnly {
		shards = nil
	}
	printPlan(shards, serial)
	if c.dryRun || len(tests) == 0 {
		return nil
	}
	fmt.Printf("shard: logs in %s\n", c.out)
	// The test binaries share one image cache, so that Debian image
	// builds download each package once per run, not once per binary,
	// and each image is built once and copied by every later build.
	if os.Getenv("DEN_TEST_IMAGE_CACHE") == "" {
		if c.imageCache, err = os.MkdirTemp("", "den-image-cache-"); err != nil {
			return fmt.Errorf("making the image builds' package cache: %w", err)
		}
		defer os.RemoveAll(c.imageCache)
	}
	return runAll(c, bin, pkgDir, f, shards, serial)
}

// listTests lists the binary's top-level tests that match top.
func listTests(bin, pkgDir, top string) ([]string, error) {
	cmd := exec.Command(bin, "-test.list", top)
	cmd.Dir, cmd.Stderr = pkgDir, os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("listing the integration tests: %w", err)
	}
	var tests []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "Test") && !strings.ContainsAny(l, " \t") {
			tests = append(tests, l)
		}
	}
	if len(tests) == 0 {
		fmt.Printf("shard: no test to run: %s", out) // TestMain says why, when not root
	}
	return tests, nil
}

func loadPlanFiles(pkgDir string, c config) (rules, map[string]time.Duration, error) {
	durs := map[string]time.Duration{}
	b, err := os.ReadFile(filepath.Join(pkgDir, c.durations))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return rules{}, nil, fmt.Errorf("reading durations: %w", err)
	}
	if err := parseDurations(bytes.NewReader(b), durs); err != nil {
		return rules{}, nil, fmt.Errorf("reading %s: %w", c.durations, err)
	}
	b, err = os.ReadFile(filepath.Join(pkgDir, c.rules))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return rules{}, nil, fmt.Errorf("reading the shard rules: %w", err)
	}
	rs, err := parseRules(bytes.NewReader(b))
	if err != nil {
		return rules{}, nil, fmt.Errorf("%s: %w", c.rules, err)
	}
	return rs, durs, nil
}

func printPlan(shards []shard, serial []string) {
	for i, s := range shards {
		fmt.Printf("shard %d/%d: %d tests, about %s\n", i+1, len(shards), len(s.tests), s.want.Round(time.Second))
	}
	if len(serial) > 0 {
		fmt.Printf("serial, after the shards: %s\n", strings.Join(serial, " "))
	}
}

// prefixWriter writes each whole line to w with prefix, only those keep
// accepts.
type prefixWriter struct {
	w      io.Writer
	prefix string
	keep   func(line string) bool
	buf    []byte
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.buf = append(p.buf, b...)
	for {
		i := bytes.IndexByte(p.buf, '\n')
		if i < 0 {
			return len(b), nil
		}
		line := string(p.buf[:i])
		p.buf = p.buf[i+1:]
		if p.keep(line) {
			fmt.Fprintf(p.w, "%s%s\n", p.prefix, line)
		}
	}
}
