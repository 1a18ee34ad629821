package initd

import (
	"os"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// procEntry is what /proc/<pid>/stat says about a process.
type procEntry struct {
	pid, ppid, pgrp, session int
	zombie                   bool
	start                    uint64 // clock ticks after boot it started at
}

// readProcTable lists every process in /proc.
func readProcTable() []procEntry {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []procEntry
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // gone already
		}
		if pe, ok := parseStat(pid, string(b)); ok {
			out = append(out, pe)
		}
	}
	return out
}

// parseStat reads "pid (comm) state ppid pgrp session ... starttime ...".
// comm may hold spaces and parentheses, so fields are counted after its
// last ')'.
func parseStat(pid int, s string) (procEntry, bool) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procEntry{}, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 4 {
		return procEntry{}, false
	}
	ppid, err1 := strconv.Atoi(f[1])
	pgrp, err2 := strconv.Atoi(f[2])
	sess, err3 := strconv.Atoi(f[3])
	if err1 != nil || err2 != nil || err3 != nil {
		return procEntry{}, false
	}
	pe := procEntry{pid: pid, ppid: ppid, pgrp: pgrp, session: sess, zombie: f[0] == "Z"}
	if len(f) > 19 { // field 22, the 20th after comm
		pe.start, _ = strconv.ParseUint(f[19], 10, 64)
	}
	return pe, true
}

// holdersOf returns the pids that have a file descriptor open on one of
// ids (as /proc/<pid>/fd links read: "pipe:[123]", "/dev/pts/4").
func holdersOf(table []procEntry, ids []string) map[int]bool {
	out := make(map[int]bool)
	if len(ids) == 0 {
		return out
	}
	for _, pe := range table {
		dir := "/proc/" + strconv.Itoa(pe.pid) + "/fd/"
		fds, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			if link, err := os.Readlink(dir + fd.Name()); err == nil && slices.Contains(ids, link) {
				out[pe.pid] = true
				break
			}
		}
	}
	return out
}

// killTree SIGKILLs everything that belongs to p: its process group, every
// descendant (including those that left the group with setsid), and every
// process still holding p's output open (descendants orphaned when their
// parent died, which were reparented to den-init). The tree is frozen
// with SIGSTOP while it is being found, so nothing forks or reparents
// under the scan, and then killed as a whole.
func (s *Server) killTree(p *proc) {
	self := os.Getpid()
	victims := make(map[int]bool)
	s.reaper.Kill(p.pid, unix.SIGSTOP) // the group, while its leader is unreaped
	for range 10 {
		found := 0
		for pid := range s.treeOf(p, readProcTable(), victims) {
			if !victims[pid] && pid != self && pid != 1 {
				victims[pid] = true
				_ = unix.Kill(pid, unix.SIGSTOP)
				found++
			}
		}
		if found == 0 {
			break
		}
	}
	s.reaper.Kill(p.pid, sigKILL)
	for pid := range victims {
		_ = unix.Kill(pid, sigKILL)
	}
}

// treeOf returns the live processes of table that belong to p, counting
// the descendants of known as p's too.
func (s *Server) treeOf(p *proc, table []procEntry, known map[int]bool) map[int]bool {
	// A recycled pid may lead another of our processes' groups: then the
	// group and session ids no longer mean p.
	ownIDs := !s.pidTakenByOther(p)
	running := !p.hasExited()
	tree := holdersOf(table, p.outIDs)
	for _, pe := range table {
		if known[pe.pid] || running && pe.pid == p.pid ||
			ownIDs && (pe.pgrp == p.pid || p.tty && pe.session == p.pid) {
			tree[pe.pid] = true
		}
	}
	// Never den-init itself: it holds the output too, and everything is
	// its descendant.
	delete(tree, os.Getpid())
	for grew := true; grew; { // add descendants until the set stops growing
		grew = false
		for _, pe := range table {
			if tree[pe.ppid] && !tree[pe.pid] {
				tree[pe.pid] = true
				grew = true
			}
		}
	}
	for _, pe := range table {
		if pe.zombie {
			delete(tree, pe.pid)
		}
	}
	return tree
}

// pidTakenByOther reports whether another live process of ours has p's pid.
func (s *Server) pidTakenByOther(p *proc) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, q := range s.procs {
		if q != p && q.pid == p.pid {
			return true
		}
	}
	return false
}
