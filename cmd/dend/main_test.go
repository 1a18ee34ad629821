package main

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

func TestMain(m *testing.M) {
	if os.Getenv("DEND_TEST_MAIN") != "" {
		os.Args = append([]string{"dend"}, strings.Fields(os.Getenv("DEND_TEST_MAIN"))...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// dend --help names each flag with its value's type (or none, for a
// switch), never with words of its description.
func TestHelpPlaceholders(t *testing.T) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "DEND_TEST_MAIN=--help")
	out, _ := cmd.CombinedOutput()
	flagLine := regexp.MustCompile(`^  -([a-z0-9-]+)(?: (.*))?$`)
	n := 0
	for _, line := range strings.Split(string(out), "\n") {
		m := flagLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		n++
		switch m[2] {
		case "", "string", "duration", "int", "int64", "uint", "float", "value":
		default:
			t.Errorf("-%s shows %q as its value", m[1], m[2])
		}
	}
	if n < 40 {
		t.Fatalf("found %d flags in dend --help:\n%s", n, out)
	}
	if !strings.Contains(string(out), "'den image warm IMAGE N'") {
		t.Errorf("the commands quoted in descriptions are gone:\n%s", out)
	}
}
