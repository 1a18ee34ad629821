package main

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestPlanBalancesAndKeepsGroupsTogether(t *testing.T) {
	rs, err := parseRules(strings.NewReader("# c\nserial TestAlone\ntogether net TestNet.*\n"))
	if err != nil {
		t.Fatal(err)
	}
	s := time.Second
	durs := map[string]time.Duration{"TestBig": 100 * s, "TestNetA": 30 * s, "TestNetB": 30 * s, "TestSmall": 10 * s, "TestAlone": 5 * s}
	tests := []string{"TestSmall", "TestNetA", "TestBig", "TestAlone", "TestNetB", "TestNew"}
	shards, serial := plan(tests, 2, rs, durs, 20*s)
	if !slices.Equal(serial, []string{"TestAlone"}) {
		t.Errorf("serial %v", serial)
	}
	if len(shards) != 2 {
		t.Fatalf("%d shards", len(shards))
	}
	// 100 | 60 (the group) + 20 (the unknown one) + 10 = 90.
	if got := shards[0]; !slices.Equal(got.tests, []string{"TestBig"}) || got.want != 100*s {
		t.Errorf("shard 1: %v %s", got.tests, got.want)
	}
	if got := shards[1]; !slices.Equal(got.tests, []string{"TestNetA", "TestNetB", "TestNew", "TestSmall"}) || got.want != 90*s {
		t.Errorf("shard 2: %v %s", got.tests, got.want)
	}
	// More shards than tests: no empty one.
	if shards, _ := plan([]string{"TestBig"}, 3, rules{}, durs, s); len(shards) != 1 {
		t.Errorf("%d shards for one test", len(shards))
	}
}

func TestParseRulesRefusesWhatItCannotRead(t *testing.T) {
	for _, bad := range []string{"serial", "together net", "alone TestX", "serial Test(", "together g a b"} {
		if _, err := parseRules(strings.NewReader(bad)); err == nil || !strings.Contains(err.Error(), "line 1") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func TestRunPatternMatchesOnlyItsTests(t *testing.T) {
	re := regexp.MustCompile(runPattern([]string{"TestA", "TestA2"}, ""))
	for name, want := range map[string]bool{"TestA": true, "TestA2": true, "TestAB": false, "XTestA": false} {
		if re.MatchString(name) != want {
			t.Errorf("%s: %v", name, !want)
		}
	}
	if got := runPattern([]string{"TestDocsCommands"}, "docs/cli.md$"); got != "^(TestDocsCommands)$/docs/cli.md$" {
		t.Errorf("with a subtest pattern: %s", got)
	}
}

func TestDurationsFromLogAndFile(t *testing.T) {
	durs := map[string]time.Duration{}
	log := "=== RUN   TestA\n--- PASS: TestA (12.50s)\n    --- PASS: TestA/sub (1.00s)\n--- FAIL: TestB (3.00s)\nok\n"
	if err := parseDurations(strings.NewReader("# x\n7.0 TestC\n1.0 TestA\n"+log), durs); err != nil {
		t.Fatal(err)
	}
	want := map[string]time.Duration{"TestA": 12500 * time.Millisecond, "TestB": 3 * time.Second, "TestC": 7 * time.Second}
	if len(durs) != len(want) {
		t.Fatalf("%v", durs)
	}
	for k, v := range want {
		if durs[k] != v {
			t.Errorf("%s: %s, want %s", k, durs[k], v)
		}
	}
	var b strings.Builder
	if err := writeDurations(&b, durs); err != nil {
		t.Fatal(err)
	}
	again := map[string]time.Duration{}
	parseDurations(strings.NewReader(b.String()), again)
	if !strings.HasPrefix(strings.SplitN(b.String(), "\n", 3)[1], "12.5 TestA") || len(again) != 3 {
		t.Errorf("written:\n%s", b.String())
	}
}

func TestSplitFlags(t *testing.T) {
	f, err := splitFlags([]string{"-race", "-v", "-run", "TestDocs/docs/cli.md", "-timeout=90m", "-count=1", "-short", "-tags", "x"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(f.build, []string{"-race", "-tags=x"}) || !slices.Equal(f.test, []string{"-test.short"}) ||
		f.top != "TestDocs" || f.sub != "docs/cli.md" || f.timeout != "90m" || !f.verbose {
		t.Errorf("%+v", f)
	}
	for _, bad := range []string{"./integration/", "-run"} {
		if _, err := splitFlags([]string{bad}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestFailedTestsAndTheirOutput(t *testing.T) {
	log := t.TempDir() + "/l"
	body := "=== RUN   TestA\n    a_test.go:1: boom\n--- FAIL: TestA (1.00s)\n=== RUN   TestB\n--- PASS: TestB (1.00s)\n=== RUN   TestC\n    --- FAIL: TestC/x (0.00s)\n--- FAIL: TestC (1.00s)\nFAIL\n"
	if err := writeFile(log, body); err != nil {
		t.Fatal(err)
	}
	if got := failedTests(log); !slices.Equal(got, []string{"TestA", "TestC"}) {
		t.Errorf("failed: %v", got)
	}
	if got := testOutput(log, "TestA", 10); got != "=== RUN   TestA\n    a_test.go:1: boom\n--- FAIL: TestA (1.00s)\n" {
		t.Errorf("TestA's output: %q", got)
	}
}

func writeFile(path, s string) error { return os.WriteFile(path, []byte(s), 0o644) }
