package initd

import (
	"bytes"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/den-dev/den/internal/guest"
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
	for _, pe := range descendants(readProcTable(), os.Getpid()) {
		out = append(out, describe(pe))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
