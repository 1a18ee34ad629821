package main

import (
	"bytes"
	"flag"
	"os"
	"strings"
	"testing"
	"time"
)

// helpOf prints fs's flags as dend --help does.
func helpOf(fs *flag.FlagSet) string {
	var b bytes.Buffer
	b.WriteString("dend v1: den's daemon.\n\nUsage: dend [flags]\n\nEvery flag can also be set as DEN_<FLAG> in the environment.\n\nFlags:\n")
	fs.SetOutput(&b)
	fs.PrintDefaults()
	return b.String()
}

func TestParseHelp(t *testing.T) {
	host, _ := os.Hostname()
	fs := flag.NewFlagSet("dend", flag.ContinueOnError)
	fs.String("data-dir", "/var/lib/den", "where records live")
	fs.Duration("stop-grace", 5*time.Second, "time between SIGTERM and SIGKILL")
	fs.Bool("debug", false, "debug logs")
	fs.Bool("x", false, "a flag of one letter")
	fs.Int("keep-checkpoints", 0, "checkpoints kept (0: all)")
	fs.String("runsc", "/build/bin/runsc", "the pinned runsc binary")
	fs.String("node", host, "this dend's node name")
	fs.String("warm", "", "instances kept booted, IMAGE=N,...\n'den image warm IMAGE N' overrides it")
	intro, flags, err := parseHelp(helpOf(fs))
	if err != nil {
		t.Fatal(err)
	}
	if len(intro) != 3 {
		t.Errorf("intro = %q, want the three lines before Flags:", intro)
	}
	want := map[string]helpFlag{
		"data-dir":         {name: "data-dir", arg: "string", usage: "where records live", def: "/var/lib/den"},
		"stop-grace":       {name: "stop-grace", arg: "duration", usage: "time between SIGTERM and SIGKILL", def: "5s"},
		"debug":            {name: "debug", usage: "debug logs"},
		"x":                {name: "x", usage: "a flag of one letter"},
		"keep-checkpoints": {name: "keep-checkpoints", arg: "int", usage: "checkpoints kept (0: all)"},
		"warm":             {name: "warm", arg: "string", usage: "instances kept booted, IMAGE=N,...\n'den image warm IMAGE N' overrides it"},
	}
	got := map[string]helpFlag{}
	for _, f := range flags {
		got[f.name] = f
	}
	if len(flags) != 8 {
		t.Errorf("parsed %d flags, want 8: %+v", len(flags), flags)
	}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("flag %s = %+v, want %+v", name, got[name], w)
		}
	}

	page, err := dendManPage(helpOf(fs), "v1", time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), "/build/bin")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		`.TH DEND 8 "Nov 2026" "dend v1" "den manual"`,
		`.BI "\-\-data\-dir " string`,
		`.BI "\-\-stop\-grace " duration`,
		`.B \-\-debug`,
		`.B \-\-x`,
		`(default: /var/lib/den)`,
		`(default: runsc in dend's own directory)`,
		`(default: the host's name)`,
		`.br`,
		`\&'den image warm IMAGE N' overrides it`,
	} {
		if !strings.Contains("\n"+string(page), "\n"+line+"\n") {
			t.Errorf("the page lacks the line %q:\n%s", line, page)
		}
	}
	if strings.Contains(string(page), "/build/bin") {
		t.Errorf("the page names the build's directory:\n%s", page)
	}
}

// TestManPageRefusesAMissingFlag: the check dendManPage ends with reads
// the help on its own, so a flag the parser dropped is caught.
func TestManPageRefusesAMissingFlag(t *testing.T) {
	help := "Flags:\n  -data-dir string\n    \twhere records live\n  -listen string\n    \tTCP address\n"
	if err := namesEveryFlag(help, "\n.BI \"\\-\\-data\\-dir \" string\n"); err == nil || !strings.Contains(err.Error(), "listen") {
		t.Errorf("namesEveryFlag = %v, want listen named missing", err)
	}
	if _, _, err := parseHelp("Flags:\n  -a string\nstray line\n"); err == nil {
		t.Error("parseHelp took a line that is not dend's help")
	}
	if _, _, err := parseHelp("no flags here\n"); err == nil {
		t.Error("parseHelp took a help with no Flags: line")
	}
}

func TestVersions(t *testing.T) {
	date := time.Date(2026, 11, 29, 2, 11, 34, 0, time.UTC)
	for _, c := range []struct{ in, deb, tar string }{
		{"v1.2.3", "1.2.3", "1.2.3"},
		{"v1.2.3-4-gabc1234", "1.2.3+4.gabc1234", "1.2.3-4-gabc1234"},
		{"v1.2.3-4-gabc1234-dirty", "1.2.3+4.gabc1234.dirty", "1.2.3-4-gabc1234-dirty"},
		{"039baf9", "0~git20261129021134.g039baf9", "039baf9"},
		{"abc1234-dirty", "0~git20261129021134.gabc1234.dirty", "abc1234-dirty"},
	} {
		if got := debVersion(c.in, date); got != c.deb {
			t.Errorf("debVersion(%q) = %q, want %q", c.in, got, c.deb)
		}
		if got := tarVersion(c.in); got != c.tar {
			t.Errorf("tarVersion(%q) = %q, want %q", c.in, got, c.tar)
		}
	}
}
