package initd

import (
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/den-dev/den/internal/guest"
)

// The processes that may hold a secret: its root, the root's group (also
// orphans in it), anything below one of those even in a group of its own;
// nothing else. A root with nothing left alive is forgotten.
func TestSecretHolders(t *testing.T) {
	s := &Server{secretRoots: map[int]bool{100: true, 300: true}}
	live := []procEntry{
		{pid: 100, ppid: 1, pgrp: 100, session: 1},
		{pid: 101, ppid: 100, pgrp: 100, session: 1},
		{pid: 102, ppid: 1, pgrp: 100, session: 1},   // `cmd &` whose shell ended
		{pid: 103, ppid: 101, pgrp: 103, session: 1}, // left the group, still below
		{pid: 104, ppid: 103, pgrp: 103, session: 1},
		{pid: 200, ppid: 1, pgrp: 200, session: 1}, // started without secrets
		{pid: 201, ppid: 200, pgrp: 200, session: 1},
	}
	got := slices.Sorted(maps.Keys(s.secretHolders(live)))
	if want := []int{100, 101, 102, 103, 104}; !slices.Equal(got, want) {
		t.Errorf("holders %v, want %v", got, want)
	}
	if want := map[int]bool{100: true}; !maps.Equal(s.secretRoots, want) {
		t.Errorf("roots after the first look %v, want %v (300 has nothing alive)", s.secretRoots, want)
	}

	// The root ends; its orphan in the group still holds it.
	if got := s.secretHolders([]procEntry{{pid: 102, ppid: 1, pgrp: 100, session: 1}, live[5]}); !maps.Equal(got, map[int]bool{102: true}) {
		t.Errorf("holders after the root ended %v, want only 102", got)
	}
	if got := s.secretHolders(live[5:]); len(got) != 0 || len(s.secretRoots) != 0 {
		t.Errorf("holders %v, roots %v once every holder ended; want none", got, s.secretRoots)
	}
}

// A process in the hold group, or in a cgroup below it, holds secrets
// whatever its lineage: a daemon that forked twice, left its group and
// session and was reparented to den-init, and what it started since.
func TestSecretHoldersInGroup(t *testing.T) {
	dir := t.TempDir()
	g := &holdGroup{dir: dir}
	if err := g.join(400); err != nil { // a plain file stands in for cgroup.procs
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "below"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "below", "cgroup.procs"), []byte("500\n501\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := &Server{secretRoots: map[int]bool{}, holds: g, log: slog.New(slog.DiscardHandler)}
	live := []procEntry{
		{pid: 400, ppid: 1, pgrp: 400, session: 400}, // setsid, forked again, orphaned
		{pid: 401, ppid: 400, pgrp: 401, session: 400},
		{pid: 500, ppid: 1, pgrp: 500, session: 500}, // moved itself below the group
		{pid: 600, ppid: 1, pgrp: 600, session: 1},   // no secrets
	}
	got := slices.Sorted(maps.Keys(s.secretHolders(live)))
	if want := []int{400, 401, 500}; !slices.Equal(got, want) {
		t.Errorf("holders %v, want %v", got, want)
	}
}

// The holders' mark counts for a flagged process none of whose ancestors
// up to den-init lacks the flag: a holder reparented to den-init, what it
// forked, and one whose parent's pid was taken since by a newer process.
// A process that set the flag itself below an unflagged one (a browser's
// sandboxed helper) is no holder, nor is anything when den-init has the
// flag too.
func TestMarkedHolders(t *testing.T) {
	const self = 1
	live := []procEntry{
		{pid: 10, ppid: 1, start: 100},  // started with secrets, flagged
		{pid: 11, ppid: 10, start: 101}, // its child
		{pid: 12, ppid: 1, start: 102},  // a double fork's orphan, moved out of the cgroup
		{pid: 13, ppid: 12, start: 103},
		{pid: 20, ppid: 1, start: 110},  // a browser, no flag
		{pid: 21, ppid: 20, start: 111}, // its helper, which set the flag itself
		{pid: 22, ppid: 21, start: 112}, // and what that forked
		{pid: 30, ppid: 31, start: 120}, // a holder whose parent died: its pid is now...
		{pid: 31, ppid: 1, start: 130},  // ...a newer process's, without the flag
		{pid: 40, ppid: 99, start: 140}, // a holder whose parent is gone from the table
		{pid: 50, ppid: 1, start: 150},  // no flag, no secrets
	}
	flags := map[int]bool{1: false, 10: true, 11: true, 12: true, 13: true, 21: true, 22: true, 30: true, 40: true}
	got := slices.Sorted(maps.Keys(markedHolders(live, self, func(pid int) bool { return flags[pid] })))
	if want := []int{10, 11, 12, 13, 30, 40}; !slices.Equal(got, want) {
		t.Errorf("marked holders %v, want %v", got, want)
	}
	flags[self] = true
	if got := markedHolders(live, self, func(pid int) bool { return flags[pid] }); len(got) != 0 {
		t.Errorf("with den-init flagged too: %v, want none", got)
	}
}

// A holder moved out of the hold group, with its process group, session
// and lineage gone, is still found by its mark, once den-init has started
// a process with secrets; before that no mark is looked at.
func TestSecretHoldersByMark(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	self := os.Getpid()
	s := &Server{secretRoots: map[int]bool{}, holds: &holdGroup{dir: dir}, log: slog.New(slog.DiscardHandler),
		hasMark: func(pid int) bool { return pid == 700 || pid == 701 }}
	live := []procEntry{
		{pid: 700, ppid: self, pgrp: 700, session: 700, start: 5}, // setsid, forked, orphaned, moved out
		{pid: 701, ppid: 700, pgrp: 700, session: 700, start: 6},
		{pid: 800, ppid: self, pgrp: 800, session: 800, start: 7},
	}
	if got := s.secretHolders(live); len(got) != 0 {
		t.Errorf("holders %v before any process was given secrets, want none", got)
	}
	s.secretsGiven = true
	got := slices.Sorted(maps.Keys(s.secretHolders(live)))
	if want := []int{700, 701}; !slices.Equal(got, want) {
		t.Errorf("holders %v, want %v", got, want)
	}
}

// The wrapper marks what it execs, before it has its secrets: the
// command, and anything it runs, has no_new_privs, for good.
func TestSecretExecMarks(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, SecretExecArg, "/bin/sh", "sh", "-c",
		`grep NoNewPrivs /proc/self/status; sh -c 'grep NoNewPrivs /proc/self/status'; echo "$API_TOKEN"`)
	cmd.ExtraFiles = []*os.File{r}
	frames, err := guest.EncodeSecrets([]guest.Secret{{Env: "API_TOKEN", Value: []byte("marked")}})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		w.Write(frames)
		w.Close()
	}()
	out, err := cmd.CombinedOutput()
	r.Close()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if want := "NoNewPrivs:\t1\nNoNewPrivs:\t1\nmarked\n"; string(out) != want {
		t.Errorf("the wrapped command printed %q, want %q", out, want)
	}
}
