package initd

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
)

// countDescendants counts the live processes below pid, found by walking
// the parent links in procDir. As PID 1 of a sandbox den-init inherits
// every orphan, so this is every process but itself; zombies not yet
// reaped are not counted.
func countDescendants(procDir string, pid int) int {
	entries, err := os.ReadDir(procDir)
	if err != nil {
		return 0
	}
	parent := make(map[int]int, len(entries))
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(procDir, e.Name(), "stat"))
		if err != nil {
			continue // it ended meanwhile
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses,
		// so read from the last ')'.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := bytes.Fields(b[i+1:])
		if len(f) < 2 || string(f[0]) == "Z" {
			continue
		}
		if pp, err := strconv.Atoi(string(f[1])); err == nil {
			parent[p] = pp
		}
	}
	n := 0
	for p := range parent {
		for q, hops := parent[p], 0; hops < len(parent); q, hops = parent[q], hops+1 {
			if q == pid {
				n++
				break
			}
			if q <= 1 {
				break
			}
		}
	}
	return n
}
