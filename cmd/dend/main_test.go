package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
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

// dend --help says in words the defaults that are this machine's (paths
// beside dend, the host's name), so that the man page made from it does
// not carry the builder's, and says each flag's default once.
func TestHelpMachineDefaults(t *testing.T) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "DEND_TEST_MAIN=--help")
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "DEN_") {
			t.Skipf("%s is set: help shows it as a default", kv)
		}
	}
	out, _ := cmd.CombinedOutput()
	help := string(out)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	if strings.Contains(help, filepath.Dir(exe)) || host != "" && strings.Contains(help, strconv.Quote(host)) {
		t.Errorf("help shows this machine's paths or name (%s, %q):\n%s", filepath.Dir(exe), host, help)
	}
	for flag, want := range map[string]string{
		"runsc": "(default: runsc in dend's own directory)",
		"init":  "(default: den-init in dend's own directory)",
		"node":  "(default: this host's name)",
	} {
		_, rest, _ := strings.Cut(help, "\n  -"+flag+" ")
		usage, _, _ := strings.Cut(rest, "\n  -")
		if !strings.Contains(usage, want) || strings.Count(usage, "default") != 1 {
			t.Errorf("-%s's help: %q; want its default once, %q", flag, usage, want)
		}
	}
}
