package initd

import (
	"bytes"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/den-dev/den/internal/guest"
	"github.com/den-dev/den/internal/initd/httpio"
)

// descendants lists the live processes below pid, by pid. As PID 1 of a
// sandbox den-init inherits every orphan, so this is every process but
// itself; zombies not yet reaped are left out.
func descendants(table []procEntry, pid int) []procEntry {
	parent := make(map[int]int, len(table))
	for _, pe := range table {
		parent[pe.pid] = pe.ppid
	}
	var out []procEntry
	for _, pe := range table {
		if pe.zombie {
			continue
		}
		for q, hops := pe.ppid, 0; hops < len(table); q, hops = parent[q], hops+1 {
			if q == pid {
				out = append(out, pe)
				break
			}
			if q <= 1 {
				break
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].pid < out[j].pid })
	return out
}

// describe reads what ps shows of a process; fields it cannot read (the
// process ended meanwhile) stay empty.
func describe(pe procEntry) guest.Process {
	p := guest.Process{PID: pe.pid, PPID: pe.ppid}
	dir := "/proc/" + strconv.Itoa(pe.pid) + "/"
	if b, err := os.ReadFile(dir + "stat"); err == nil {
		open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
		if open >= 0 && end > open {
			p.Name = string(b[open+1 : end])
			if f := bytes.Fields(b[end+1:]); len(f) > 0 {
				p.State = string(f[0])
			}
		}
	}
	if b, err := os.ReadFile(dir + "cmdline"); err == nil {
		p.Command = strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
	}
	if b, err := os.ReadFile(dir + "status"); err == nil {
		for _, line := range bytes.Split(b, []byte{'\n'}) {
			if v, ok := bytes.CutPrefix(line, []byte("VmRSS:")); ok {
				if f := bytes.Fields(v); len(f) > 0 {
					kb, _ := strconv.ParseInt(string(f[0]), 10, 64)
					p.RSSBytes = kb << 10
				}
			}
		}
	}
	return p
}

func (s *Server) handlePs(w http.ResponseWriter, r *http.Request) error {
	out := []guest.Process{}
	live := descendants(readProcTable(), os.Getpid())
	holders := s.secretHolders(live)
	for _, pe := range live {
		p := describe(pe)
		p.Secrets = holders[pe.pid]
		out = append(out, p)
	}
	httpio.WriteJSON(w, http.StatusOK, out)
	return nil
}

// holdsSecrets reports whether process pid may hold a secret. Where no
// process was ever given secrets, none can, and /proc is not read.
func (s *Server) holdsSecrets(pid int) bool {
	s.mu.Lock()
	given := s.secretsGiven
	s.mu.Unlock()
	return given && s.secretHolders(descendants(readProcTable(), os.Getpid()))[pid]
}

// secretHolders returns, of the live processes, those that may hold a
// secret, known three ways, any one of which is enough: by the holders'
// mark, which nothing in the sandbox can remove (holdmark.go); by the hold
// group (holdgroup.go), where a process started with secrets and all it
// forks stay unless root moves them out; and by lineage: a process
// started with secrets (a root), every process in a root's process group
// or session (a shell's `cmd &` and pipelines stay in them), and every
// process below one of those. Roots none of whose processes live any
// more are forgotten.
func (s *Server) secretHolders(live []procEntry) map[int]bool {
	var grouped map[int]bool
	if s.holds != nil {
		var err error
		if grouped, err = s.holds.members(); err != nil {
			s.log.Warn("secret holders are known by their lineage and mark alone", keyErr, err)
		}
	}
	s.mu.Lock()
	given := s.secretsGiven
	s.mu.Unlock()
	var flagged map[int]bool
	if given { // read from /proc, outside the lock
		flagged = markedHolders(live, os.Getpid(), s.hasMark)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.secretRoots) == 0 && len(grouped) == 0 && len(flagged) == 0 {
		return nil
	}
	parent := make(map[int]int, len(live))
	for _, pe := range live {
		parent[pe.pid] = pe.ppid
	}
	marked := map[int]bool{}
	for _, pe := range live {
		if s.secretRoots[pe.pid] || s.secretRoots[pe.pgrp] || s.secretRoots[pe.session] || grouped[pe.pid] || flagged[pe.pid] {
			marked[pe.pid] = true
		}
	}
	holders, used := map[int]bool{}, map[int]bool{}
	for _, pe := range live {
		for q, hops := pe.pid, 0; q > 1 && hops <= len(live); q, hops = parent[q], hops+1 {
			if marked[q] {
				holders[pe.pid] = true
				break
			}
		}
	}
	for _, pe := range live {
		if holders[pe.pid] {
			used[pe.pid], used[pe.pgrp], used[pe.session] = true, true, true
		}
	}
	for root := range s.secretRoots {
		if !used[root] {
			delete(s.secretRoots, root)
		}
	}
	if len(holders) == 0 {
		return nil
	}
	return holders
}
