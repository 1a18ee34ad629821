package initd

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
)

// A holdGroup marks every process that may hold a secret with a cgroup:
// den-init puts each process it starts with secrets into it before handing
// the secrets over, and the kernel (gVisor's sentry) puts every process
// that process forks, at any depth, into the same cgroup. Membership does
// not depend on the parent, process group or session, so it survives
// setsid, double forks, daemon(3) and being reparented to den-init, and
// it is saved and restored with the sandbox's memory.
//
// The hierarchy used is cpuacct, which only counts: moving a process
// there changes no limit (den-init reads memory and pids at their roots).
//
// A process can leave only by writing its pid into another cgroup's
// cgroup.procs, which needs root in the sandbox: a deliberately hostile
// command running as root can leave the group. It keeps the holders'
// mark (holdmark.go), which nothing can remove, so it is still found;
// the group is one of the ways holders are known, not the only one.
// Moving into a cgroup below the hold group keeps the membership.
type holdGroup struct {
	dir string // the cgroup directory: <cgroups>/cpuacct/den-secrets
}

// holdGroupName names den's cgroup of secret holders.
const holdGroupName = "den-secrets"

// newHoldGroup makes (or, in a restored sandbox, finds) the hold group
// under gVisor's cgroups mounted at cgroups. It returns nil when there
// are none (den-init on a host) or the group cannot be made: holders are
// then known by their lineage alone.
func newHoldGroup(cgroups string) (*holdGroup, error) {
	if cgroups == "" {
		return nil, nil
	}
	dir := filepath.Join(cgroups, "cpuacct", holdGroupName)
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("making the secret holders' cgroup: %w", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "cgroup.procs")); err != nil {
		return nil, fmt.Errorf("making the secret holders' cgroup: %w", err)
	}
	return &holdGroup{dir: dir}, nil
}

// join moves pid (and, the kernel sees to it, whatever it forks from now
// on) into the group.
func (g *holdGroup) join(pid int) error {
	err := os.WriteFile(filepath.Join(g.dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0)
	if err != nil {
		return fmt.Errorf("marking process %d as holding secrets: %w", pid, err)
	}
	return nil
}

// members lists the processes in the group or in any cgroup below it.
func (g *holdGroup) members() (map[int]bool, error) {
	out := map[int]bool{}
	err := filepath.WalkDir(g.dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if path != g.dir && errors.Is(err, fs.ErrNotExist) {
				return nil // a cgroup removed meanwhile
			}
			return err
		}
		if d.IsDir() || d.Name() != "cgroup.procs" {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		for _, f := range bytes.Fields(b) {
			if pid, err := strconv.Atoi(string(f)); err == nil {
				out[pid] = true
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing the secret holders' cgroup: %w", err)
	}
	return out, nil
}
