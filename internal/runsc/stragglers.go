package runsc

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// killStragglers kills the host processes (sandbox, gofer) of instance id
// under den's root that runsc no longer knows: a boot or restore that
// fails after starting them can leave them running with no state file, so
// `runsc delete` cannot find them. They are recognized by their command
// line, which names den's --root and ends with the instance id.
func (r *Runtime) killStragglers(id string) int {
	root := []byte("--root=" + r.cfg.Root)
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	n := 0
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || len(b) == 0 {
			continue
		}
		args := bytes.Split(bytes.TrimRight(b, "\x00"), []byte{0})
		if string(args[len(args)-1]) != id || !containsArg(args, root) {
			continue
		}
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		if err != nil || pid == os.Getpid() {
			continue
		}
		if syscall.Kill(pid, syscall.SIGKILL) == nil {
			n++
		}
	}
	return n
}

func containsArg(args [][]byte, want []byte) bool {
	for _, a := range args {
		if bytes.Equal(a, want) {
			return true
		}
	}
	return false
}
