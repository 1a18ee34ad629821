package initd

import (
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
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
