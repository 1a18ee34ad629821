package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// goFlags are go test's flags split for a compiled test binary.
type goFlags struct {
	build   []string // for go test -c
	test    []string // for the binary, as -test.NAME
	top     string   // the -run pattern's top-level part, for listing
	sub     string   // its part after the first slash
	timeout string
	verbose bool
}

// buildFlags are go test's flags for the build; valued ones take a value.
var buildFlags = map[string]bool{"race": false, "msan": false, "asan": false, "cover": false, "a": false,
	"trimpath": false, "tags": true, "covermode": true, "coverpkg": true, "gcflags": true, "ldflags": true,
	"mod": true, "buildvcs": true, "p": true}

// valueFlags are the test binary's flags that take a value.
var valueFlags = map[string]bool{"run": true, "skip": true, "timeout": true, "count": true, "parallel": true,
	"cpu": true, "coverprofile": true, "shuffle": true, "outputdir": true, "fullpath": false}

// splitFlags sorts go test flags (GO_TEST_FLAGS) into the build's and the
// binary's.
func splitFlags(args []string) (goFlags, error) {
	f := goFlags{top: "."}
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || name == "" {
			return f, fmt.Errorf("%q: only go test's flags may be given (packages are not: the integration package is run)", a)
		}
		name = strings.TrimPrefix(name, "test.")
		takes, isBuild := buildFlags[name]
		if !isBuild {
			takes = valueFlags[name]
		}
		if takes && !hasValue {
			if i+1 == len(args) {
				return f, fmt.Errorf("flag -%s needs a value", name)
			}
			i++
			value, hasValue = args[i], true
		}
		switch {
		case isBuild:
			f.build = append(f.build, "-"+name+suffix(value, hasValue))
		case name == "run":
			f.top, f.sub, _ = strings.Cut(value, "/")
		case name == "timeout":
			f.timeout = value
		case name == "count":
			// Every shard runs each of its tests once, as -count=1 does.
		case name == "v":
			f.verbose = !hasValue || value == "true"
		default:
			f.test = append(f.test, "-test."+name+suffix(value, hasValue))
		}
	}
	return f, nil
}

func suffix(value string, has bool) string {
	if !has {
		return ""
	}
	return "=" + value
}

// result is how one test binary ended.
type result struct {
	name   string
	log    string
	tests  int
	took   time.Duration
	err    error
	failed []string // top-level tests that failed
}

// runAll runs the shards at once, then the serial tests, and summarizes.
func runAll(c config, bin, pkgDir string, f goFlags, shards []shard, serial []string) error {
	out := &lockedWriter{w: os.Stdout}
	start := time.Now()
	results := make([]result, len(shards))
	var wg sync.WaitGroup
	for i, s := range shards {
		name := fmt.Sprintf("%d/%d", i+1, len(shards))
		wg.Go(func() {
			results[i] = runOne(c, bin, pkgDir, f, name, s.tests, out)
		})
	}
	wg.Wait()
	if len(serial) > 0 {
		results = append(results, runOne(c, bin, pkgDir, f, "serial", serial, out))
	}
	return summarize(os.Stdout, results, time.Since(start))
}

// runOne runs tests in one test binary, its -v output to a log of its own
// and its tests' results to out.
func runOne(c config, bin, pkgDir string, f goFlags, name string, tests []string, out io.Writer) result {
	r := result{name: name, tests: len(tests), log: filepath.Join(c.out, "shard-"+strings.ReplaceAll(name, "/", "-of-")+".log")}
	log, err := os.Create(r.log)
	if err != nil {
		r.err = fmt.Errorf("creating its log: %w", err)
		return r
	}
	defer log.Close()
	args := append([]string{"-test.run", runPattern(tests, f.sub), "-test.count=1", "-test.v=true",
		"-test.timeout", c.timeout}, f.test...)
	cmd := exec.Command(bin, args...)
	cmd.Dir = pkgDir
	cmd.Env = os.Environ()
	if c.imageCache != "" {
		cmd.Env = append(cmd.Env, "DEN_TEST_IMAGE_CACHE="+c.imageCache)
	}
	if name != "serial" {
		cmd.Env = append(cmd.Env, "DEN_TEST_SHARD="+name)
	}
	pw := &prefixWriter{w: out, prefix: "[" + name + "] ", keep: func(l string) bool {
		return f.verbose || strings.HasPrefix(l, "--- ") || strings.HasPrefix(l, "panic:") ||
			l == "PASS" || l == "FAIL" || strings.HasPrefix(l, "FAIL\t") || strings.HasPrefix(l, "ok\t")
	}}
	cmd.Stdout = io.MultiWriter(log, pw)
	cmd.Stderr = cmd.Stdout
	fmt.Fprintf(out, "[%s] %d tests: %s\n", name, len(tests), strings.Join(tests, " "))
	start := time.Now()
	r.err = cmd.Run()
	r.took = time.Since(start)
	log.Sync()
	r.failed = failedTests(r.log)
	return r
}

// failedTests lists the top-level tests a -v log says failed.
func failedTests(log string) []string {
	f, err := os.Open(log)
	if err != nil {
		return nil
	}
	defer f.Close()
	var failed []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "--- FAIL: "); ok {
			failed = append(failed, strings.Fields(rest)[0])
		}
	}
	return failed
}

// summarize prints each binary's outcome and the failing tests' output;
// errFailed if any failed.
func summarize(w io.Writer, results []result, took time.Duration) error {
	fmt.Fprintf(w, "\nshard summary (%s in all):\n", took.Round(time.Second))
	var failed []string
	bad := false
	for _, r := range results {
		status := "ok"
		switch {
		case len(r.failed) > 0:
			status = "FAIL: " + strings.Join(r.failed, " ")
		case r.err != nil:
			status = fmt.Sprintf("FAIL: %v, with no test failed by name (a panic or timeout: see the log)", r.err)
		}
		bad = bad || r.err != nil || len(r.failed) > 0
		fmt.Fprintf(w, "  %-7s %3d tests %8s  %s  (%s)\n", r.name, r.tests, r.took.Round(time.Second), status, r.log)
		for _, t := range r.failed {
			failed = append(failed, t)
			fmt.Fprintf(w, "\n=== output of %s (%s) ===\n%s", t, r.name, testOutput(r.log, t, 300))
		}
		if r.err != nil && len(r.failed) == 0 {
			fmt.Fprintf(w, "\n=== the end of %s ===\n%s", r.log, tailFile(r.log, 60))
		}
	}
	if !bad {
		fmt.Fprintln(w, "shard: PASS")
		return nil
	}
	fmt.Fprintf(w, "\nshard: FAIL: %s\n", strings.Join(failed, " "))
	return errFailed
}

// testOutput is test's part of a -v log (from its === RUN to its ---
// line), at most its last n lines.
func testOutput(log, test string, n int) string {
	b, _ := os.ReadFile(log)
	var lines []string
	in := false
	for _, l := range strings.Split(string(b), "\n") {
		if l == "=== RUN   "+test {
			in, lines = true, nil
		}
		if in {
			lines = append(lines, l)
		}
		if f := strings.Fields(l); in && len(f) > 2 && f[0] == "---" && f[2] == test {
			in = false
		}
	}
	if len(lines) > n {
		lines = append([]string{fmt.Sprintf("... (%d lines before: see the log)", len(lines)-n)}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n") + "\n"
}

func tailFile(path string, n int) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n") + "\n"
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}
