package main

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// rules say which tests may not run beside others: serial ones run alone
// after the shards; the tests of one together group share a fixed
// resource (an address, a routing table) and run in one shard, one after
// another.
type rules struct {
	serial   []*regexp.Regexp
	together []group
}

type group struct {
	name string
	re   []*regexp.Regexp
}

// parseRules reads lines "serial REGEXP" and "together NAME REGEXP";
// blank lines and those starting with # are skipped. A regexp matches a
// top-level test's whole name.
func parseRules(r io.Reader) (rules, error) {
	var rs rules
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		bad := func(err error) (rules, error) { return rules{}, fmt.Errorf("line %d: %w", n, err) }
		switch {
		case f[0] == "serial" && len(f) == 2:
			re, err := regexp.Compile("^(?:" + f[1] + ")$")
			if err != nil {
				return bad(err)
			}
			rs.serial = append(rs.serial, re)
		case f[0] == "together" && len(f) == 3:
			re, err := regexp.Compile("^(?:" + f[2] + ")$")
			if err != nil {
				return bad(err)
			}
			i := slices.IndexFunc(rs.together, func(g group) bool { return g.name == f[1] })
			if i < 0 {
				rs.together = append(rs.together, group{name: f[1]})
				i = len(rs.together) - 1
			}
			rs.together[i].re = append(rs.together[i].re, re)
		default:
			return bad(fmt.Errorf("want \"serial REGEXP\" or \"together GROUP REGEXP\", got %q", sc.Text()))
		}
	}
	return rs, sc.Err()
}

func matchesAny(res []*regexp.Regexp, name string) bool {
	return slices.ContainsFunc(res, func(re *regexp.Regexp) bool { return re.MatchString(name) })
}

// durationLine is a test's line in go test -v output: its result and time.
var durationLine = regexp.MustCompile(`^--- (?:PASS|FAIL|SKIP): (Test\S*) \(([0-9.]+)s\)`)

// parseDurations reads the durations file's "SECONDS NAME" lines, or the
// top-level results of go test -v output (later ones win).
func parseDurations(r io.Reader, into map[string]time.Duration) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if m := durationLine.FindStringSubmatch(line); m != nil {
			secs, _ := strconv.ParseFloat(m[2], 64)
			into[m[1]] = time.Duration(secs * float64(time.Second))
			continue
		}
		f := strings.Fields(line)
		if len(f) != 2 || strings.HasPrefix(f[0], "#") {
			continue
		}
		if secs, err := strconv.ParseFloat(f[0], 64); err == nil && strings.HasPrefix(f[1], "Test") {
			into[f[1]] = time.Duration(secs * float64(time.Second))
		}
	}
	return sc.Err()
}

// writeDurations writes the durations file, longest first.
func writeDurations(w io.Writer, d map[string]time.Duration) error {
	names := make([]string, 0, len(d))
	for n := range d {
		names = append(names, n)
	}
	slices.SortFunc(names, func(a, b string) int {
		if d[a] != d[b] {
			return int(d[b] - d[a])
		}
		return strings.Compare(a, b)
	})
	bw := bufio.NewWriter(w)
	fmt.Fprintln(bw, "# Seconds each integration test took, from go test -v output: `make test-durations` refreshes it.")
	for _, n := range names {
		fmt.Fprintf(bw, "%.1f %s\n", d[n].Seconds(), n)
	}
	return bw.Flush()
}

// shard is the tests one test binary runs, in order, and how long they
// are expected to take.
type shard struct {
	tests []string
	want  time.Duration
}

// plan splits tests into n shards balanced by their durations (def for a
// test with none), and the serial ones. A together group goes whole to
// one shard.
func plan(tests []string, n int, rs rules, durs map[string]time.Duration, def time.Duration) (shards []shard, serial []string) {
	type unit struct {
		tests []string
		want  time.Duration
	}
	var units []unit
	groups := map[string]int{}
	for _, t := range tests {
		want, ok := durs[t]
		if !ok {
			want = def
		}
		if matchesAny(rs.serial, t) {
			serial = append(serial, t)
			continue
		}
		name := ""
		for _, g := range rs.together {
			if matchesAny(g.re, t) {
				name = g.name
				break
			}
		}
		if i, ok := groups[name]; ok && name != "" {
			units[i].tests = append(units[i].tests, t)
			units[i].want += want
			continue
		}
		if name != "" {
			groups[name] = len(units)
		}
		units = append(units, unit{[]string{t}, want})
	}
	// Longest first, each to the shard with the least so far.
	slices.SortStableFunc(units, func(a, b unit) int { return int(b.want - a.want) })
	shards = make([]shard, n)
	for _, u := range units {
		i := 0
		for j := range shards {
			if shards[j].want < shards[i].want {
				i = j
			}
		}
		shards[i].tests = append(shards[i].tests, u.tests...)
		shards[i].want += u.want
	}
	return slices.DeleteFunc(shards, func(s shard) bool { return len(s.tests) == 0 }), serial
}

// runPattern is the -test.run value that runs exactly tests, with sub (a
// -run pattern's part after its first slash) for their subtests.
func runPattern(tests []string, sub string) string {
	quoted := make([]string, len(tests))
	for i, t := range tests {
		quoted[i] = regexp.QuoteMeta(t)
	}
	p := "^(" + strings.Join(quoted, "|") + ")$"
	if sub != "" {
		p += "/" + sub
	}
	return p
}
