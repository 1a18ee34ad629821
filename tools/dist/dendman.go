package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// helpFlag is one flag as dend --help prints it (the flag package's
// PrintDefaults): "  -name placeholder", then its usage on lines of
// their own that begin "    \t" (on the same line after a tab for a
// flag of one letter with no placeholder).
type helpFlag struct {
	name, arg, usage, def string
}

var (
	flagLine    = regexp.MustCompile(`^  -([A-Za-z0-9][A-Za-z0-9_.-]*)(?: (\S+))?(?:\t(.*))?$`)
	defaultTail = regexp.MustCompile(` \(default (.+)\)$`)
)

// parseHelp splits dend --help's text into the paragraphs before the
// flags and the flags themselves.
func parseHelp(text string) (intro []string, flags []helpFlag, err error) {
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	i := 0
	for ; i < len(lines) && strings.TrimSpace(lines[i]) != "Flags:"; i++ {
		if l := strings.TrimSpace(lines[i]); l != "" {
			intro = append(intro, l)
		}
	}
	if i == len(lines) {
		return nil, nil, fmt.Errorf("dend --help printed no \"Flags:\" line")
	}
	for _, l := range lines[i+1:] {
		if m := flagLine.FindStringSubmatch(l); m != nil {
			flags = append(flags, helpFlag{name: m[1], arg: m[2], usage: m[3]})
			continue
		}
		rest, ok := strings.CutPrefix(l, "    \t")
		if !ok || len(flags) == 0 {
			return nil, nil, fmt.Errorf("dend --help: unexpected line %q", l)
		}
		f := &flags[len(flags)-1]
		if f.usage != "" {
			f.usage += "\n"
		}
		f.usage += rest
	}
	for i := range flags {
		f := &flags[i]
		if m := defaultTail.FindStringSubmatchIndex(f.usage); m != nil {
			f.def = f.usage[m[2]:m[3]]
			if s, err := strconv.Unquote(f.def); err == nil {
				f.def = s
			}
			f.usage = f.usage[:m[0]]
		}
	}
	if len(flags) == 0 {
		return nil, nil, fmt.Errorf("dend --help listed no flags")
	}
	return intro, flags, nil
}

// dendManPage renders dend --help's text as the dend(8) man page. A
// default that names this machine (the host's name, or a path in
// binDir, where the build put dend) is said as what it means on any
// host.
func dendManPage(help, version string, date time.Time, binDir string) ([]byte, error) {
	intro, flags, err := parseHelp(help)
	if err != nil {
		return nil, err
	}
	host, _ := os.Hostname()
	var b bytes.Buffer
	fmt.Fprintf(&b, ".TH DEND 8 %q %q \"den manual\"\n", date.Format("Jan 2006"), "dend "+version)
	b.WriteString(".SH NAME\ndend \\- den's daemon: durable gVisor sandboxes for AI agents\n")
	b.WriteString(".SH SYNOPSIS\n.B dend\n.RI [ flags ]\n")
	b.WriteString(".SH DESCRIPTION\n.B dend\nowns the sandboxes on this host and serves den's API on a unix socket\n(and, if asked, on TCP); the\n.BR den (1)\ncommand drives it.\n")
	for _, p := range intro {
		if strings.HasPrefix(p, "dend ") || strings.HasPrefix(p, "Usage:") {
			continue
		}
		fmt.Fprintf(&b, ".PP\n%s\n", roff(p))
	}
	b.WriteString(".PP\nUnder systemd, dend.service reads these variables from\n.IR /etc/den/dend.env ,\nand DEND_FLAGS there passes any other flag.\n")
	b.WriteString(".SH OPTIONS\n")
	for _, f := range flags {
		b.WriteString(".TP\n")
		if f.arg != "" {
			fmt.Fprintf(&b, ".BI \"%s \" %s\n", roffFlag(f.name), roff(f.arg))
		} else {
			fmt.Fprintf(&b, ".B %s\n", roffFlag(f.name))
		}
		b.WriteString(strings.ReplaceAll(roff(f.usage), "\n", "\n.br\n") + "\n")
		if def := f.def; def != "" {
			switch {
			case host != "" && def == host:
				def = "the host's name"
			case binDir != "" && strings.HasPrefix(def, binDir+string(filepath.Separator)):
				def = filepath.Base(def) + " in dend's own directory"
			}
			if !strings.Contains(f.usage, "default: "+def) {
				fmt.Fprintf(&b, "(default: %s)\n", roff(def))
			}
		}
	}
	b.WriteString(".SH FILES\n")
	for _, f := range [][2]string{
		{"/etc/den/dend.env", "dend's settings under systemd"},
		{"/var/lib/den", "the data directory: records, the storage pool, run output (--data-dir)"},
		{"/run/den/den.sock", "the unix socket den uses (--socket)"},
	} {
		fmt.Fprintf(&b, ".TP\n.I %s\n%s\n", f[0], roff(f[1]))
	}
	b.WriteString(".SH SEE ALSO\n.BR den (1),\n.BR systemctl (1),\n.BR runsc (8)\n")
	if err := namesEveryFlag(help, b.String()); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// namesEveryFlag checks page against help by a reading of its own: each
// line of help that starts a flag has its --name in the page.
func namesEveryFlag(help, page string) error {
	var missing []string
	for _, m := range regexp.MustCompile(`(?m)^  -(\S+)`).FindAllStringSubmatch(help, -1) {
		if !strings.Contains(page, "\n.B "+roffFlag(m[1])+"\n") && !strings.Contains(page, "\n.BI \""+roffFlag(m[1])+" \"") {
			missing = append(missing, m[1])
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("dend's man page lacks flags dend --help lists: %s", strings.Join(missing, ", "))
	}
	return nil
}

// roffFlag is --name set for roff, whose - is a hyphen, not a minus.
func roffFlag(name string) string { return `\-\-` + strings.ReplaceAll(name, "-", `\-`) }

// roff escapes text for a man page: backslashes, and the control
// characters a line may not begin with.
func roff(s string) string {
	s = strings.ReplaceAll(s, `\`, `\e`)
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, ".") || strings.HasPrefix(l, "'") {
			lines[i] = `\&` + l
		}
	}
	return strings.Join(lines, "\n")
}
