package integration

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/den-dev/den/api"
)

// waitRun polls a run until it ends.
func waitRun(t *testing.T, d *dend, name, runID string, within time.Duration) *api.Run {
	t.Helper()
	var run *api.Run
	waitFor(t, within, "run "+runID+" to end", func() bool {
		r, err := d.c.GetRun(ctxT(t, 10*time.Second), name, runID)
		if err != nil {
			t.Fatalf("reading run %s: %v", runID, err)
		}
		run = r
		return r.Status != api.RunRunning
	})
	return run
}

// keptOnDisk is what the run's output files hold in dend's data dir.
func keptOnDisk(t *testing.T, d *dend, sandboxID, runID, stream string) int64 {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(d.dataDir, "runs", sandboxID))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var n int64
	for _, e := range ents {
		if e.Name() == runID+"."+stream || strings.HasPrefix(e.Name(), runID+"."+stream+".") {
			fi, err := e.Info()
			if err != nil {
				t.Fatal(err)
			}
			n += fi.Size()
		}
	}
	return n
}

var markerLine = regexp.MustCompile(`\n\[den: (\d+) bytes of (stdout|stderr) dropped here, offsets (\d+) to (\d+); [^\]]*\]\n`)

// A run printing far more than its cap keeps its head and its tail on the
// host, no more than the cap, and says what it dropped.
func TestOutputBounded(t *testing.T) {
	const capBytes = 1 << 20
	d := startDend(t, "--run-output-max", "1M", "--run-output-allowance", "3M")
	sb := d.create("loud")

	script := `echo START; echo err-start >&2; head -c 1073741824 /dev/zero; echo END; echo err-end >&2; exit 3`
	out, errs, code := d.den("exec", "-d", "loud", "--", "sh", "-c", script)
	if code != 0 {
		t.Fatalf("den exec -d: %d %s", code, errs)
	}
	runID := strings.TrimSpace(out)
	// A GiB through den-init takes 4 to 5 minutes on a loaded 2-core
	// host (a VM beside the suite): the bound is for a hang, not a time.
	run := waitRun(t, d, "loud", runID, 12*time.Minute)

	wantSize := int64(len("START\n") + 1<<30 + len("END\n"))
	if run.Status != api.RunExited || run.ExitCode == nil || *run.ExitCode != 3 {
		t.Fatalf("run ended %s exit %v, want exited 3", run.Status, run.ExitCode)
	}
	if run.StdoutSize != wantSize || run.StderrSize != int64(len("err-start\nerr-end\n")) {
		t.Errorf("sizes %d/%d, want %d/%d", run.StdoutSize, run.StderrSize, wantSize, len("err-start\nerr-end\n"))
	}
	kept := keptOnDisk(t, d, sb.ID, runID, "stdout")
	if kept > capBytes || kept < capBytes/2 {
		t.Errorf("%d bytes of stdout on disk, want at most the %d cap (and its head at least)", kept, capBytes)
	}
	if run.StdoutDropped != wantSize-kept || run.StderrDropped != 0 {
		t.Errorf("dropped %d/%d, want %d/0", run.StdoutDropped, run.StderrDropped, wantSize-kept)
	}
	if run.OutputCut != api.OutputCutCap || run.OutputMax != capBytes {
		t.Errorf("output_cut %q output_max %d, want cap and %d", run.OutputCut, run.OutputMax, capBytes)
	}

	t.Run("logs show head, marker and tail", func(t *testing.T) {
		logs, lerrs, code := d.den("logs", "loud", runID)
		if code != 0 {
			t.Fatalf("den logs: %d %s", code, lerrs)
		}
		if !strings.HasPrefix(logs, "START\n") || !strings.HasSuffix(logs, "END\n") {
			t.Errorf("logs start %q and end %q", logs[:min(len(logs), 20)], logs[max(0, len(logs)-20):])
		}
		ms := markerLine.FindAllStringSubmatch(logs, -1)
		if len(ms) != 1 || ms[0][1] != strconv.FormatInt(run.StdoutDropped, 10) {
			t.Fatalf("markers %q, want one for %d bytes", ms, run.StdoutDropped)
		}
		if int64(len(logs)) != kept+int64(len(ms[0][0])) {
			t.Errorf("logs are %d bytes, want the %d kept and the marker", len(logs), kept)
		}
		if lerrs != "err-start\nerr-end\n" {
			t.Errorf("stderr logs %q", lerrs)
		}
		// An offset inside the dropped middle starts with the marker for
		// the rest of it, then the tail up to the end.
		from, _ := strconv.ParseInt(ms[0][3], 10, 64)
		to, _ := strconv.ParseInt(ms[0][4], 10, 64)
		part := readLogs(t, d, "loud", runID, api.StreamStdout, from+10, false)
		m := markerLine.FindStringSubmatch(part)
		if m == nil || !strings.HasPrefix(part, m[0]) || m[3] != strconv.FormatInt(from+10, 10) || m[4] != strconv.FormatInt(to, 10) {
			t.Errorf("reading from inside the gap starts %q", part[:min(len(part), 200)])
		}
		if int64(len(part)-len(m[0])) != wantSize-to {
			t.Errorf("the tail read from inside the gap is %d bytes, want %d", len(part)-len(m[0]), wantSize-to)
		}
	})

	t.Run("runs --json shows what was dropped", func(t *testing.T) {
		out, errs, code := d.den("runs", "loud", "--json")
		if code != 0 {
			t.Fatalf("den runs: %d %s", code, errs)
		}
		var runs []api.Run
		if err := json.Unmarshal([]byte(out), &runs); err != nil {
			t.Fatal(err)
		}
		if len(runs) == 0 || runs[0].ID != runID || runs[0].StdoutDropped != run.StdoutDropped {
			t.Errorf("runs --json: %s", out)
		}
	})

	t.Run("a run may ask for less, not for more or garbage", func(t *testing.T) {
		out, errs, code := d.den("exec", "-d", "--output-max", "64K", "loud", "--", "sh", "-c", "head -c 300000 /dev/zero")
		if code != 0 {
			t.Fatalf("den exec --output-max 64K: %d %s", code, errs)
		}
		small := waitRun(t, d, "loud", strings.TrimSpace(out), time.Minute)
		if small.OutputMax != 64<<10 || small.StdoutSize != 300000 || small.StdoutDropped != 300000-keptOnDisk(t, d, sb.ID, small.ID, "stdout") {
			t.Errorf("small run: max %d size %d dropped %d", small.OutputMax, small.StdoutSize, small.StdoutDropped)
		}
		if k := keptOnDisk(t, d, sb.ID, small.ID, "stdout"); k > 64<<10 {
			t.Errorf("kept %d bytes, over the 64K the run asked for", k)
		}
		before, _ := d.c.Runs(ctxT(t, time.Minute), "loud", 0)
		for _, bad := range []struct{ value, want string }{
			{"2M", "over dend's"},
			{"garbage", "invalid output cap"},
			{"-5", "invalid output cap"},
			{"1K", "invalid output cap"},
		} {
			_, errs, code := d.den("exec", "--output-max", bad.value, "loud", "--", "true")
			if code == 0 || !strings.Contains(errs, bad.want) || !strings.Contains(errs, "hint:") {
				t.Errorf("--output-max %s: exit %d, stderr %q", bad.value, code, errs)
			}
		}
		if after, _ := d.c.Runs(ctxT(t, time.Minute), "loud", 0); len(after) != len(before) {
			t.Errorf("refused execs left runs: %d before, %d after", len(before), len(after))
		}
	})

	t.Run("the sandbox's allowance prunes its oldest runs", func(t *testing.T) {
		for i := 0; i < 3; i++ {
			if out, errs, code := d.den("exec", "loud", "--", "sh", "-c", "head -c 3000000 /dev/zero | tr '\\0' x"); code != 0 || len(out) < 1<<20 {
				t.Fatalf("exec: %d, %d bytes, %s", code, len(out), errs)
			}
		}
		first, err := d.c.GetRun(ctxT(t, time.Minute), "loud", runID)
		if err != nil {
			t.Fatal(err)
		}
		if first.OutputCut != api.OutputCutPruned || first.StdoutDropped != first.StdoutSize || keptOnDisk(t, d, sb.ID, runID, "stdout") != 0 {
			t.Errorf("oldest run after newer ones filled the allowance: cut %q dropped %d of %d", first.OutputCut, first.StdoutDropped, first.StdoutSize)
		}
		if logs := readLogs(t, d, "loud", runID, api.StreamStdout, 0, false); len(markerLine.FindAllString(logs, -1)) != 1 || len(logs) > 200 {
			t.Errorf("pruned run's logs: %q", logs)
		}
		got, err := d.c.GetSandbox(ctxT(t, time.Minute), "loud")
		if err != nil {
			t.Fatal(err)
		}
		if got.Usage == nil || got.Usage.RunOutputLimitBytes != 3<<20 || got.Usage.RunOutputBytes > 3<<20 || got.Usage.RunOutputBytes < 1<<20 {
			t.Errorf("usage %+v, want run output within the 3M allowance", got.Usage)
		}
		if out, _, _ := d.den("limits", "loud"); !strings.Contains(out, "run output") {
			t.Errorf("den limits does not show run output:\n%s", out)
		}
	})
}

// A run that goes on across dend restarts keeps one consistent stream:
// the collector carries on from the pieces on disk, and output made while
// the disk is down to dend's reserve is dropped, then kept again.
func TestOutputAcrossRestartsAndReserve(t *testing.T) {
	d := startDend(t, "--run-output-max", "1M")
	sb := d.create("long")
	// Writes 3 MB, then a line every 50ms until told to stop.
	script := `echo START; head -c 3000000 /dev/zero; while [ ! -e /tmp/stop ]; do echo tick; sleep 0.05; done; echo END`
	out, errs, code := d.den("exec", "-d", "long", "--", "sh", "-c", script)
	if code != 0 {
		t.Fatalf("den exec -d: %d %s", code, errs)
	}
	runID := strings.TrimSpace(out)
	waitFor(t, time.Minute, "the first 3 MB", func() bool {
		r, err := d.c.GetRun(ctxT(t, 10*time.Second), "long", runID)
		return err == nil && r.StdoutSize > 3000000
	})

	// A dend whose reserve is more than the disk has: it says so, refuses
	// new work with a hint, and drops the run's output meanwhile.
	d.stop()
	args := d.args
	d.args = append(append([]string(nil), args...), "--data-reserve", "1000000G")
	d.start()
	h, err := d.c.Health(ctxT(t, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if h.Disk == nil || !h.Disk.Low || h.Disk.ReserveBytes != 1000000<<30 {
		t.Fatalf("health disk %+v, want low", h.Disk)
	}
	for _, args := range [][]string{{"exec", "long", "--", "true"}, {"create", "other", "--image", "busybox"}} {
		_, errs, code := d.den(args...)
		if code == 0 || !strings.Contains(errs, "free-space reserve") || !strings.Contains(errs, "hint:") {
			t.Errorf("den %v with the disk at its reserve: exit %d, stderr %q", args, code, errs)
		}
	}
	if _, errs, _ := d.den("top", "long"); !strings.Contains(errs, "free-space reserve") {
		t.Errorf("den top does not warn of the reserve: %q", errs)
	}
	var dropping *api.Run
	waitFor(t, time.Minute, "output to be dropped for the reserve", func() bool {
		r, err := d.c.GetRun(ctxT(t, 10*time.Second), "long", runID)
		dropping = r
		return err == nil && r.OutputCut == api.OutputCutReserve && r.StdoutSize > 3000000+200
	})

	// Space again (here: the reserve lifted): new work is accepted and
	// the run's output is kept again, after a marker for what was not.
	d.stop()
	d.args = args
	d.start()
	if h, err := d.c.Health(ctxT(t, time.Minute)); err != nil || h.Disk == nil || h.Disk.Low {
		t.Fatalf("health after the reserve was lifted: %+v %v", h, err)
	}
	waitFor(t, time.Minute, "ticks kept again", func() bool {
		r, err := d.c.GetRun(ctxT(t, 10*time.Second), "long", runID)
		return err == nil && r.StdoutSize-r.StdoutDropped > keptAt(dropping)+20
	})
	d.mustSh("long", "touch /tmp/stop")
	run := waitRun(t, d, "long", runID, time.Minute)
	if run.Status != api.RunExited || *run.ExitCode != 0 {
		t.Fatalf("run ended %s %v", run.Status, run.ExitCode)
	}
	kept := keptOnDisk(t, d, sb.ID, runID, "stdout")
	if kept > 1<<20 || run.StdoutDropped != run.StdoutSize-kept {
		t.Errorf("kept %d on disk, record says %d of %d dropped", kept, run.StdoutDropped, run.StdoutSize)
	}
	logs := readLogs(t, d, "long", runID, api.StreamStdout, 0, false)
	if !strings.HasPrefix(logs, "START\n") || !strings.HasSuffix(logs, "tick\nEND\n") {
		t.Errorf("logs start %q end %q", logs[:min(20, len(logs))], logs[max(0, len(logs)-20):])
	}
	var sum int64
	for _, m := range markerLine.FindAllStringSubmatch(logs, -1) {
		n, _ := strconv.ParseInt(m[1], 10, 64)
		sum += n
	}
	if sum != run.StdoutDropped || len(markerLine.FindAllString(logs, -1)) < 2 {
		t.Errorf("markers stand for %d bytes (%d markers), record says %d dropped", sum, len(markerLine.FindAllString(logs, -1)), run.StdoutDropped)
	}
	// Everything the markers do not stand for is the stream itself.
	if stripped := markerLine.ReplaceAllString(logs, ""); int64(len(stripped)) != kept {
		t.Errorf("logs without markers are %d bytes, %d kept", len(stripped), kept)
	}
}

func keptAt(r *api.Run) int64 { return r.StdoutSize - r.StdoutDropped }

// dend refuses bad sizes at start, naming the flag.
func TestOutputFlagsRejectBadSizes(t *testing.T) {
	for _, args := range [][]string{
		{"--run-output-max", "garbage"},
		{"--run-output-max", "-5"},
		{"--run-output-max", "1K"},
		{"--data-reserve", "-1G"},
		{"--run-output-allowance", "1M", "--run-output-max", "2M"},
	} {
		cmd := exec.Command(filepath.Join(binDir, "dend"), append([]string{"--data-dir", t.TempDir(), "--socket", filepath.Join(t.TempDir(), "s")}, args...)...)
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), strings.TrimPrefix(args[0], "--")) {
			t.Errorf("dend %v: %v\n%s", args, err, out)
		}
	}
}
