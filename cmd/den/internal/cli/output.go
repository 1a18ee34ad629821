package cli

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/docker/go-units"
	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/den-dev/den/api"
)

// PrintJSON writes v indented, for --json.
func PrintJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// Table writes aligned columns; call Flush when done.
type Table struct{ tw *tabwriter.Writer }

func NewTable(w io.Writer, header ...string) *Table {
	t := &Table{tw: tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)}
	t.Row(header...)
	return t
}

// Row writes one row. Cells often hold what others chose (SSH user
// names, commands, key comments, process names): control characters are
// shown escaped, never sent to the terminal.
func (t *Table) Row(cells ...string) {
	safe := make([]string, len(cells))
	for i, c := range cells {
		safe[i] = EscapeControl(c)
	}
	fmt.Fprintln(t.tw, strings.Join(safe, "\t"))
}

func (t *Table) Flush() error { return t.tw.Flush() }

// EscapeControl returns s with what a terminal would act on rather than
// show written the way Go writes it in a string literal: control
// characters (ESC, BEL, newlines, tabs), the marks that reorder text
// (bidirectional overrides), and bytes that are not UTF-8. The rest,
// other scripts and emoji included, is kept.
func EscapeControl(s string) string {
	if !strings.ContainsFunc(s, unsafeRune) && utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD"):
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case unsafeRune(r):
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// unsafeRune reports whether a terminal acts on r rather than showing it.
func unsafeRune(r rune) bool {
	return unicode.IsControl(r) || r >= '\u202a' && r <= '\u202e' || r >= '\u2066' && r <= '\u2069'
}

// Ago says how long before now t was, the way people say it.
func Ago(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return units.HumanDuration(now.Sub(t)) + " ago"
}

// ShortDuration formats a run's duration compactly: 12ms, 1.5s, 3m20s.
func ShortDuration(d time.Duration) string {
	switch {
	case d < 0:
		return "-"
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	default:
		return d.Round(time.Second).String()
	}
}

func FormatCPUs(c float64) string { return strconv.FormatFloat(c, 'f', -1, 64) }

// RenderSandboxes prints the sandboxes table. Names are unique per owner,
// so when an admin's list holds several owners it shows whose each is,
// and the ids when a name repeats; a NODE column when they are on several
// nodes of a fleet; a PORTS column, with public ones marked, when any of
// them exposes a port.
func RenderSandboxes(w io.Writer, sbs []api.Sandbox, now time.Time) error {
	owners, names, nodes := map[string]bool{}, map[string]int{}, map[string]bool{}
	for _, s := range sbs {
		owners[s.Owner] = true
		names[s.Name]++
		nodes[s.Node] = true
	}
	ids := slices.ContainsFunc(sbs, func(s api.Sandbox) bool { return names[s.Name] > 1 })
	ports := slices.ContainsFunc(sbs, func(s api.Sandbox) bool { return len(s.Ports) > 0 })
	outdated := slices.ContainsFunc(sbs, func(s api.Sandbox) bool { return s.ImageOutdated })
	var header []string
	if ids {
		header = append(header, "ID")
	}
	header = append(header, "NAME")
	if len(owners) > 1 {
		header = append(header, "OWNER")
	}
	header = append(header, "STATE")
	if len(nodes) > 1 {
		header = append(header, "NODE")
	}
	header = append(header, "IMAGE", "CPUS", "MEMORY", "GEN", "AGE")
	if outdated {
		header = append(header, "OUTDATED")
	}
	if ports {
		header = append(header, "PORTS")
	}
	t := NewTable(w, header...)
	for _, s := range sbs {
		var row []string
		if ids {
			row = append(row, s.ID)
		}
		row = append(row, s.Name)
		if len(owners) > 1 {
			row = append(row, cmp.Or(s.Owner, "-"))
		}
		row = append(row, s.State)
		if len(nodes) > 1 {
			row = append(row, cmp.Or(s.Node, "-"))
		}
		row = append(row, s.Image, FormatCPUs(s.CPUs), units.BytesSize(float64(s.MemoryBytes)),
			strconv.FormatInt(s.Generation, 10), Ago(s.CreatedAt, now))
		if outdated {
			cell := "-"
			if s.ImageOutdated {
				cell = fmt.Sprintf("runs %s@%d", s.Image, s.ImageVersion)
			}
			row = append(row, cell)
		}
		if ports {
			row = append(row, PortsCell(s.Ports))
		}
		t.Row(row...)
	}
	return t.Flush()
}

// IsTerminal reports whether f is a terminal (an *os.File on a tty).
func IsTerminal(f any) bool {
	fd := FdOf(f)
	return fd >= 0 && term.IsTerminal(fd)
}

// FdOf returns f's file descriptor, or -1 when it has none.
func FdOf(f any) int {
	if x, ok := f.(interface{ Fd() uintptr }); ok {
		return int(x.Fd())
	}
	return -1
}

// progressThreshold is the size from which transfers show a progress bar.
const progressThreshold = 8 << 20

// TransferBar counts the bytes written to it and shows a progress bar on
// w once the transfer is known to be (or has grown) over
// progressThreshold. Disabled, it only counts.
type TransferBar struct {
	w       io.Writer
	enabled bool
	total   int64 // -1 when unknown
	desc    string
	n       int64
	bar     *progressbar.ProgressBar
}

func (a *App) NewTransferBar(total int64, desc string) *TransferBar {
	return &TransferBar{w: a.Stderr, enabled: !a.JSON && IsTerminal(a.Stderr), total: total, desc: desc}
}

func (t *TransferBar) Write(p []byte) (int, error) {
	t.n += int64(len(p))
	if t.bar == nil && t.enabled && (t.total > progressThreshold || t.total < 0 && t.n > progressThreshold) {
		t.bar = progressbar.NewOptions64(t.total,
			progressbar.OptionSetWriter(t.w),
			progressbar.OptionSetDescription(t.desc),
			progressbar.OptionShowBytes(true),
			progressbar.OptionShowTotalBytes(true),
			progressbar.OptionSetWidth(30),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionClearOnFinish(),
			progressbar.OptionSpinnerType(14),
		)
		_ = t.bar.Add64(t.n - int64(len(p)))
	}
	if t.bar != nil {
		_ = t.bar.Add(len(p))
	}
	return len(p), nil
}

// Finish clears the bar, if one was shown.
func (t *TransferBar) Finish() {
	if t.bar != nil {
		_ = t.bar.Finish()
	}
}

// ImageProgress shows an image job's progress on stderr: a bar per phase
// on a terminal, else one line per phase. It returns the callback for the
// SDK and a function to call when the job is over.
func (a *App) ImageProgress() (func(api.Progress), func()) {
	if a.JSON || !IsTerminal(a.Stderr) {
		phase := ""
		return func(p api.Progress) {
			if p.Done || p.Phase == "" || p.Phase == phase {
				return
			}
			phase = p.Phase
			if p.Message != "" {
				fmt.Fprintf(a.Stderr, "%s: %s\n", p.Phase, p.Message)
			} else {
				fmt.Fprintf(a.Stderr, "%s\n", p.Phase)
			}
		}, func() {}
	}
	var (
		bar   *progressbar.ProgressBar
		phase string
	)
	finish := func() {
		if bar != nil {
			_ = bar.Finish()
			fmt.Fprintln(a.Stderr)
			bar = nil
		}
	}
	return func(p api.Progress) {
		if p.Done {
			finish()
			return
		}
		desc := p.Phase
		if p.Message != "" {
			desc += ": " + p.Message
		}
		if bar == nil || p.Phase != phase {
			finish()
			phase = p.Phase
			total := p.Total
			if total <= 0 {
				total = -1
			}
			bar = progressbar.NewOptions64(total,
				progressbar.OptionSetWriter(a.Stderr),
				progressbar.OptionSetDescription(desc),
				progressbar.OptionShowBytes(p.Total >= 1<<20 || p.Current >= 1<<20),
				progressbar.OptionSetWidth(30),
				progressbar.OptionThrottle(100*time.Millisecond),
				progressbar.OptionSpinnerType(14),
			)
		}
		if p.Total > 0 && int64(bar.GetMax64()) != p.Total {
			bar.ChangeMax64(p.Total)
		}
		bar.Describe(desc)
		_ = bar.Set64(p.Current)
	}, finish
}

// PrintList prints a list: as JSON with --json (an empty array, never
// null), else with render.
func PrintList[T any](a *App, items []T, render func() error) error {
	if a.JSON {
		if items == nil {
			items = []T{}
		}
		return PrintJSON(a.Stdout, items)
	}
	return render()
}

// PortsCell is what `den ls` shows of a sandbox's exposed ports:
// "3000 (public), 8080".
func PortsCell(ports []api.ExposedPort) string {
	if len(ports) == 0 {
		return "-"
	}
	cells := make([]string, len(ports))
	for i, p := range ports {
		cells[i] = strconv.Itoa(int(p.Port))
		if p.Public {
			cells[i] += " (public)"
		}
	}
	return strings.Join(cells, ", ")
}
