package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
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

// printJSON writes v indented, for --json.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// table writes aligned columns; call flush when done.
type table struct{ tw *tabwriter.Writer }

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)}
	t.row(header...)
	return t
}

// row writes one row. Cells often hold what others chose (SSH user
// names, commands, key comments, process names): control characters are
// shown escaped, never sent to the terminal.
func (t *table) row(cells ...string) {
	safe := make([]string, len(cells))
	for i, c := range cells {
		safe[i] = escapeControl(c)
	}
	fmt.Fprintln(t.tw, strings.Join(safe, "\t"))
}

func (t *table) flush() error { return t.tw.Flush() }

// escapeControl returns s with what a terminal would act on rather than
// show written the way Go writes it in a string literal: control
// characters (ESC, BEL, newlines, tabs), the marks that reorder text
// (bidirectional overrides), and bytes that are not UTF-8. The rest,
// other scripts and emoji included, is kept.
func escapeControl(s string) string {
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

// ago says how long before now t was, the way people say it.
func ago(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return units.HumanDuration(now.Sub(t)) + " ago"
}

// shortDuration formats a run's duration compactly: 12ms, 1.5s, 3m20s.
func shortDuration(d time.Duration) string {
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

func formatCPUs(c float64) string { return strconv.FormatFloat(c, 'f', -1, 64) }

// renderSandboxes prints the sandboxes table. Names are unique per owner,
// so when an admin's list holds several owners it shows whose each is,
// and the ids when a name repeats; a NODE column when they are on several
// nodes of a fleet; a PORTS column, with public ones marked, when any of
// them exposes a port.
func renderSandboxes(w io.Writer, sbs []api.Sandbox, now time.Time) error {
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
	t := newTable(w, header...)
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
		row = append(row, s.Image, formatCPUs(s.CPUs), units.BytesSize(float64(s.MemoryBytes)),
			strconv.FormatInt(s.Generation, 10), ago(s.CreatedAt, now))
		if outdated {
			cell := "-"
			if s.ImageOutdated {
				cell = fmt.Sprintf("runs %s@%d", s.Image, s.ImageVersion)
			}
			row = append(row, cell)
		}
		if ports {
			row = append(row, portsCell(s.Ports))
		}
		t.row(row...)
	}
	return t.flush()
}

// maxCommandWidth is how much of a command the runs table shows.
const maxCommandWidth = 60

func renderRuns(w io.Writer, runs []api.Run, now time.Time, trunc bool) error {
	labeled := slices.ContainsFunc(runs, func(r api.Run) bool { return len(r.Labels) > 0 })
	header := []string{"RUN", "STATUS", "EXIT", "STARTED", "DURATION", "COMMAND"}
	if labeled {
		// Before COMMAND, which is the widest and may be cut.
		header = slices.Insert(header, 5, "LABELS")
	}
	t := newTable(w, header...)
	for _, r := range runs {
		end := now
		if r.EndedAt != nil {
			end = *r.EndedAt
		}
		cmd := shellJoin(r.Argv)
		if trunc && len(cmd) > maxCommandWidth {
			cmd = cmd[:maxCommandWidth-3] + "..."
		}
		cells := []string{r.ID, r.Status, runExit(r), ago(r.StartedAt, now), shortDuration(end.Sub(r.StartedAt)), cmd}
		if labeled {
			cells = slices.Insert(cells, 5, labelList(r.Labels))
		}
		t.row(cells...)
	}
	return t.flush()
}

// labelList is a LABELS cell: K=V pairs by key, comma-separated, or "-".
func labelList(labels map[string]string) string {
	if len(labels) == 0 {
		return "-"
	}
	pairs := make([]string, 0, len(labels))
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		pairs = append(pairs, k+"="+labels[k])
	}
	return strings.Join(pairs, ",")
}

// runExit is the EXIT column: the code, the signal, or "-" while running.
func runExit(r api.Run) string {
	switch {
	case r.LimitHit == api.LimitMemory:
		return "OOM"
	case r.Signal != "":
		return "SIG" + strings.TrimPrefix(strings.ToUpper(r.Signal), "SIG")
	case r.ExitCode != nil:
		return strconv.Itoa(*r.ExitCode)
	}
	return "-"
}

// shellJoin quotes argv the way a POSIX shell would need it.
func shellJoin(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		if a != "" && strings.IndexFunc(a, needsQuote) < 0 {
			q[i] = a
			continue
		}
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}

func needsQuote(r rune) bool {
	return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,+@%", r))
}

func renderImages(w io.Writer, imgs []api.Image, now time.Time) error {
	t := newTable(w, "NAME", "VERSION", "SOURCE", "REF", "SIZE", "CREATED", "WARM", "WARM MEMORY")
	for _, i := range imgs {
		warm, warmMem := "-", "-"
		if p := i.Warm; p != nil && (p.Target > 0 || p.Ready > 0) {
			warm = fmt.Sprintf("%d/%d", p.Ready, p.Target)
			if p.Held != "" {
				warm += " (held)"
			}
			warmMem = units.BytesSize(float64(p.HostMemoryBytes))
		}
		t.row(i.Name, strconv.Itoa(max(i.Version, 1)), i.Source, cmp.Or(i.Ref, "-"), units.HumanSize(float64(i.SizeBytes)), ago(i.CreatedAt, now), warm, warmMem)
		// Its older versions follow it, newest first.
		for _, o := range slices.Backward(i.Older) {
			t.row(o.Name, fmt.Sprintf("%d (older)", o.Version), o.Source, cmp.Or(o.Ref, "-"), units.HumanSize(float64(o.SizeBytes)), ago(o.CreatedAt, now), "-", "-")
		}
	}
	return t.flush()
}

// isTerminal reports whether f is a terminal (an *os.File on a tty).
func isTerminal(f any) bool {
	fd := fdOf(f)
	return fd >= 0 && term.IsTerminal(fd)
}

// fdOf returns f's file descriptor, or -1 when it has none.
func fdOf(f any) int {
	if x, ok := f.(interface{ Fd() uintptr }); ok {
		return int(x.Fd())
	}
	return -1
}

// progressThreshold is the size from which transfers show a progress bar.
const progressThreshold = 8 << 20

// transferBar counts the bytes written to it and shows a progress bar on
// w once the transfer is known to be (or has grown) over
// progressThreshold. Disabled, it only counts.
type transferBar struct {
	w       io.Writer
	enabled bool
	total   int64 // -1 when unknown
	desc    string
	n       int64
	bar     *progressbar.ProgressBar
}

func (a *app) newTransferBar(total int64, desc string) *transferBar {
	return &transferBar{w: a.stderr, enabled: !a.jsonOut && isTerminal(a.stderr), total: total, desc: desc}
}

func (t *transferBar) Write(p []byte) (int, error) {
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

// finish clears the bar, if one was shown.
func (t *transferBar) finish() {
	if t.bar != nil {
		_ = t.bar.Finish()
	}
}

// imageProgress shows an image job's progress on stderr: a bar per phase
// on a terminal, else one line per phase. It returns the callback for the
// SDK and a function to call when the job is over.
func (a *app) imageProgress() (func(api.Progress), func()) {
	if a.jsonOut || !isTerminal(a.stderr) {
		phase := ""
		return func(p api.Progress) {
			if p.Done || p.Phase == "" || p.Phase == phase {
				return
			}
			phase = p.Phase
			if p.Message != "" {
				fmt.Fprintf(a.stderr, "%s: %s\n", p.Phase, p.Message)
			} else {
				fmt.Fprintf(a.stderr, "%s\n", p.Phase)
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
			fmt.Fprintln(a.stderr)
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
				progressbar.OptionSetWriter(a.stderr),
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

// printList prints a list: as JSON with --json (an empty array, never
// null), else with render.
func printList[T any](a *app, items []T, render func() error) error {
	if a.jsonOut {
		if items == nil {
			items = []T{}
		}
		return printJSON(a.stdout, items)
	}
	return render()
}
