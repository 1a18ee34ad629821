package runsc

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// fakeHost lays out a /sys and a /proc/self/cgroup: cgroup v2 alone, or
// v1 with the given hierarchies mounted and dend's paths under them.
type fakeHost struct {
	v2        bool
	expedited string            // rcu_expedited's content; "" when missing
	paths     map[string]string // controller → dend's path; mounted ones only
	selfLines []string          // /proc/self/cgroup
}

func (h fakeHost) make(t *testing.T) (sysfs, self string) {
	t.Helper()
	sysfs = t.TempDir()
	mkdir := func(p string) {
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mkdir(filepath.Join(sysfs, "fs/cgroup"))
	mkdir(filepath.Join(sysfs, "kernel"))
	if h.v2 {
		write(filepath.Join(sysfs, "fs/cgroup/cgroup.controllers"), "cpu memory pids\n")
	}
	if h.expedited != "" {
		write(filepath.Join(sysfs, "kernel/rcu_expedited"), h.expedited)
	}
	for c, p := range h.paths {
		dir := filepath.Join(sysfs, "fs/cgroup", c, p)
		mkdir(dir)
		write(filepath.Join(dir, "cgroup.procs"), "")
	}
	self = filepath.Join(t.TempDir(), "cgroup")
	write(self, strings.Join(h.selfLines, "\n")+"\n")
	return sysfs, self
}

var v1Self = []string{
	"9:name=systemd:/system.slice/dend.service",
	"8:pids:/system.slice/dend.service",
	"4:memory:/system.slice/dend.service",
	"1:cpu,cpuacct:/",
	"0::/system.slice/dend.service",
}

// A pacer is made only where cgroup moves wait for grace periods, on a
// hierarchy dend is in whose controller does little on a move; where
// none is mounted, dend says moves will wait.
func TestNewMovePacer(t *testing.T) {
	for _, tc := range []struct {
		name   string
		host   fakeHost
		procs  string // want, under fs/cgroup; "" for no pacer
		logged bool
	}{
		{"cgroup v1, not expedited", fakeHost{expedited: "0\n", paths: map[string]string{"pids": "/system.slice/dend.service", "memory": "/system.slice/dend.service"}, selfLines: v1Self},
			"pids/system.slice/dend.service/cgroup.procs", false},
		{"no pids hierarchy", fakeHost{expedited: "0\n", paths: map[string]string{"cpuacct": "/"}, selfLines: v1Self},
			"cpuacct/cgroup.procs", false},
		{"only the memory hierarchy mounted", fakeHost{expedited: "0\n", paths: map[string]string{"memory": "/system.slice/dend.service"}, selfLines: v1Self},
			"memory/system.slice/dend.service/cgroup.procs", false},
		{"no hierarchy of dend's mounted", fakeHost{expedited: "0\n", selfLines: v1Self}, "", true},
		{"cgroup v1, expedited", fakeHost{expedited: "1\n", paths: map[string]string{"pids": "/"}, selfLines: v1Self}, "", false},
		{"cgroup v2", fakeHost{v2: true, expedited: "0\n", selfLines: []string{"0::/system.slice/dend.service"}}, "", false},
		{"no knob", fakeHost{paths: map[string]string{"pids": "/"}, selfLines: v1Self}, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sysfs, self := tc.host.make(t)
			var buf bytes.Buffer
			p := newMovePacer(slog.New(slog.NewTextHandler(&buf, nil)), sysfs, self)
			var procs string
			if p != nil {
				var err error
				if procs, err = p.procs(); err != nil {
					t.Fatal(err)
				}
			}
			switch {
			case tc.procs == "" && p != nil:
				t.Fatalf("pacer on %s, want none", procs)
			case tc.procs != "" && p == nil:
				t.Fatalf("no pacer, want one on %s; log: %q", tc.procs, buf.String())
			case tc.procs != "" && procs != filepath.Join(sysfs, "fs/cgroup", tc.procs):
				t.Fatalf("pacer on %s, want %s", procs, tc.procs)
			}
			if got := strings.Contains(buf.String(), "will wait"); got != tc.logged {
				t.Errorf("said moves will wait = %v, want %v; log: %q", got, tc.logged, buf.String())
			}
		})
	}
}

// A held pacer joins dend's cgroup again and again; nested holds keep it
// going until the last is released, and a released one writes no more.
func TestMovePacerHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		procs := filepath.Join(t.TempDir(), "cgroup.procs")
		if err := os.WriteFile(procs, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		written := func() int {
			b, err := os.ReadFile(procs)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Trim(string(b), "0") != "" {
				t.Fatalf("pacer wrote %q, want only 0s (the writer itself)", b)
			}
			return len(b)
		}
		p := &movePacer{procs: func() (string, error) { return procs, nil }, every: time.Millisecond, log: slog.New(slog.DiscardHandler)}
		first := p.hold()
		second := p.hold()
		time.Sleep(5*time.Millisecond + time.Microsecond)
		synctest.Wait()
		if got := written(); got != 6 {
			t.Fatalf("%d moves in 5 ms held, moving every 1 ms: want 6", got)
		}
		first()
		first() // a second release of the same hold changes nothing
		time.Sleep(5 * time.Millisecond)
		synctest.Wait()
		if got := written(); got != 11 {
			t.Fatalf("%d moves after 5 ms more with the second hold: want 11", got)
		}
		second()
		synctest.Wait()
		time.Sleep(time.Second)
		synctest.Wait()
		if got := written(); got != 11 {
			t.Errorf("pacer went on moving after its last hold: %d moves, want 11", got)
		}
		again := p.hold()
		synctest.Wait()
		if got := written(); got != 12 {
			t.Errorf("a new hold after the last ended: %d moves, want 12", got)
		}
		again()
		synctest.Wait()
	})
	var nilPacer *movePacer
	nilPacer.hold()() // a host that needs no pacer: nothing happens
}

// A pacer finds dend's cgroup each time it starts: re-joining the one
// dend was in before a move would undo the move.
func TestMovePacerFollowsDend(t *testing.T) {
	host := fakeHost{expedited: "0\n", paths: map[string]string{"pids": "/a"}, selfLines: []string{"8:pids:/a"}}
	sysfs, self := host.make(t)
	p := newMovePacer(slog.New(slog.DiscardHandler), sysfs, self)
	if p == nil {
		t.Fatal("no pacer")
	}
	if err := os.MkdirAll(filepath.Join(sysfs, "fs/cgroup/pids/b"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sysfs, "fs/cgroup/pids/b/cgroup.procs"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(self, []byte("8:pids:/b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	procs, err := p.procs()
	if want := filepath.Join(sysfs, "fs/cgroup/pids/b/cgroup.procs"); err != nil || procs != want {
		t.Errorf("after dend moved: %s, %v; want %s", procs, err, want)
	}
}
