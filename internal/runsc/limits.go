package runsc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/sandbox"
)

// How a sandbox's limits are enforced, and by whom:
//
//   - CPU: the host's cpu cgroup quota. It changes at once.
//   - Memory: gVisor has no OOM killer of its own. When its host memory
//     cgroup is full, the host's kills the largest process in it, which
//     is the whole sandbox (runsc's sandbox process holds all its
//     memory). So den-init, inside, kills the largest process once the
//     sandbox's processes use more than the limit (guest.Limits), and the
//     host cgroup is set higher, by HostMemory's headroom, as a backstop
//     that stops the whole sandbox only when den-init could not keep up.
//     gVisor costs the host about 0.5 MiB per process beyond what the
//     processes use, which den-init counts (see internal/initd). Its
//     checks wake the sandbox, so while the sandbox is quiet dend watches
//     the host cgroup instead (WatchHost) and turns them off
//     (internal/sampling's WatchLimits).
//   - Processes: gVisor's own pids cgroup inside the sandbox, which makes
//     fork and clone fail with EAGAIN at the limit; den-init sets it
//     (guest.Limits). The host's pids cgroup is a backstop, as every
//     process in gVisor is about two host tasks: hitting it kills the
//     sandbox, so it is set well above.
//
// Update changes the host's share at once, in any state; den-init's
// share is changed through the guest protocol. /proc/meminfo inside shows
// the host limit the instance booted with.

// HostMemory is the host memory cgroup limit of a sandbox whose
// processes may use limit bytes: the limit, gVisor's own base use, and
// room for what den-init's kills cannot catch at once.
func HostMemory(limit int64) int64 {
	if limit <= 0 {
		return 0
	}
	return limit + 64<<20 + limit/8
}

// defaultHostPIDs is the host pids backstop of an instance booted without
// a process limit known (Start and Restore do not know it).
const defaultHostPIDs = 16384

// HostPIDs is the host pids cgroup limit of a sandbox allowed pids
// processes and threads: two host tasks per process, and the sentry's
// own threads.
func HostPIDs(pids int) int64 {
	return max(defaultHostPIDs, 2*int64(pids)+1024)
}

// Update changes the limits of an instance in place, running or paused:
// CPU at once, the host's memory and process backstops (see above). The
// limits den-init enforces inside are set with guest.Client.SetLimits:
// when lowering memory, set den-init's first, so that the sandbox is
// already under the new backstop; when raising, Update first. Disk is the
// storage pool's. Lowering memory below what the sandbox's host cgroup
// holds waits up to a few seconds for den-init's kills, then fails with
// ErrConflict.
func (r *Runtime) Update(ctx context.Context, id string, l sandbox.Limits) error {
	cg, err := r.hostCgroups(id)
	if err != nil {
		return fmt.Errorf("updating the limits of %s: %w", id, err)
	}
	if l.CPUs > 0 {
		if err := cg.setCPU(int64(l.CPUs*cpuPeriod), cpuPeriod); err != nil {
			return fmt.Errorf("updating the CPU limit of %s: %w", id, err)
		}
	}
	if err := cg.setPIDs(HostPIDs(l.PIDs)); err != nil {
		return fmt.Errorf("updating the process limit of %s: %w", id, err)
	}
	if l.MemoryBytes > 0 {
		if err := cg.setMemory(ctx, HostMemory(l.MemoryBytes)); err != nil {
			return fmt.Errorf("updating the memory limit of %s: %w", id, err)
		}
	}
	return nil
}

// eventsJSON is what `runsc events --stats` prints.
type eventsJSON struct {
	Data struct {
		CPU struct {
			Usage struct {
				Total uint64 `json:"total"` // nanoseconds
			} `json:"usage"`
		} `json:"cpu"`
		Memory struct {
			Usage struct {
				Usage uint64 `json:"usage"`
			} `json:"usage"`
		} `json:"memory"`
		Pids struct {
			Current uint64 `json:"current"`
		} `json:"pids"`
	} `json:"data"`
}

// Stats reports what an instance uses now, running or paused, as gVisor
// counts it: its processes' memory (not gVisor's own), its tasks, and the
// CPU time used since it booted. DiskBytes is left to the storage pool.
func (r *Runtime) Stats(ctx context.Context, id string) (sandbox.ResourceUsage, error) {
	out, err := r.run(ctx, id, "events", "--stats", id)
	if err != nil {
		return sandbox.ResourceUsage{}, r.verbFailed(ctx, id, "reading the usage of", err)
	}
	var ev eventsJSON
	if err := json.Unmarshal(out, &ev); err != nil {
		return sandbox.ResourceUsage{}, fmt.Errorf("decoding the usage of %s: %w", id, err)
	}
	return sandbox.ResourceUsage{
		CPUTime:     time.Duration(ev.Data.CPU.Usage.Total),
		MemoryBytes: int64(ev.Data.Memory.Usage.Usage),
		PIDs:        int(ev.Data.Pids.Current),
	}, nil
}

// ReasonOutOfMemory is ExitReason's answer for a sandbox the host's memory
// cgroup killed.
const ReasonOutOfMemory = "out of memory"

// ExitReason tells why an instance that stopped by itself did, as far as
// the host knows: ReasonOutOfMemory when its host memory cgroup had to
// kill in it (den-init could not keep its processes under their limit),
// "" when nothing says. Ask before Destroy, which removes the record.
// The host kills the largest task it sees: the whole sandbox, or only
// the host process that runs one sandbox process's memory, which then
// dies of SIGKILL while the instance runs on; a still-running instance
// answers ReasonOutOfMemory then too.
func (r *Runtime) ExitReason(ctx context.Context, id string) (string, error) {
	cg, err := r.hostCgroups(id)
	if err != nil {
		return "", fmt.Errorf("reading why %s stopped: %w", id, err)
	}
	n, err := cg.oomKills()
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading why %s stopped: %w", id, err)
	}
	if n > 0 {
		return ReasonOutOfMemory, nil
	}
	return "", nil
}

// cgroupRoot is where the host's cgroup hierarchies are mounted.
const cgroupRoot = "/sys/fs/cgroup"

// cgroupsPath is the instance's cgroup, the same under every hierarchy.
func cgroupsPath(id string) string { return "/" + cgroupParent + "/" + id }

// cgroupParent is the cgroup every instance's is made in.
const cgroupParent = "den"

// makeCgroupParent makes den's parent cgroup on a unified (v2) hierarchy
// mounted at root, if it is not there yet, before runsc boots an
// instance in it. runsc owns every directory of an instance's cgroup path
// that it creates, and removes them all when it deletes the instance: the
// first instance on a fresh host would otherwise own root/den, and its
// removal would try to take den's parent with it ("removing cgroup path
// /sys/fs/cgroup/den: device or resource busy", retried for seconds while
// other instances live in it). On cgroup v1 runsc makes the path with
// MkdirAll and owns only the instance's own directory.
func makeCgroupParent(root string) error {
	if _, err := os.Stat(filepath.Join(root, "cgroup.controllers")); err != nil {
		return nil // not the unified hierarchy
	}
	err := os.Mkdir(filepath.Join(root, cgroupParent), 0o755)
	if err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("making den's cgroup %s: %w", filepath.Join(root, cgroupParent), err)
	}
	return nil
}

// hostCgroups are the host cgroup directories runsc made for one instance
// from the spec's cgroupsPath.
type hostCgroups struct {
	v2   bool   // one unified hierarchy
	path string // cgroupsPath
}

// hostCgroups finds instance id's cgroups: NotFound when there are none.
func (r *Runtime) hostCgroups(id string) (hostCgroups, error) {
	cg := hostCgroups{path: cgroupsPath(id)}
	if _, err := os.Stat(filepath.Join(cgroupRoot, "memory")); errors.Is(err, os.ErrNotExist) {
		cg.v2 = true
	}
	if _, err := os.Stat(cg.file("memory", "")); errors.Is(err, os.ErrNotExist) {
		return cg, errdefs.NotFound("instance %s does not exist", id)
	}
	return cg, nil
}

// file is the path of a control file of controller ctrl ("" for the
// directory).
func (c hostCgroups) file(ctrl, name string) string {
	if c.v2 {
		return filepath.Join(cgroupRoot, c.path, name)
	}
	return filepath.Join(cgroupRoot, ctrl, c.path, name)
}

func (c hostCgroups) write(ctrl, name, value string) error {
	return os.WriteFile(c.file(ctrl, name), []byte(value), 0)
}

func (c hostCgroups) setCPU(quota, period int64) error {
	if c.v2 {
		return c.write("cpu", "cpu.max", fmt.Sprintf("%d %d", quota, period))
	}
	if err := c.write("cpu", "cpu.cfs_period_us", strconv.FormatInt(period, 10)); err != nil {
		return err
	}
	return c.write("cpu", "cpu.cfs_quota_us", strconv.FormatInt(quota, 10))
}

func (c hostCgroups) setPIDs(n int64) error {
	return c.write("pids", "pids.max", strconv.FormatInt(n, 10))
}

// setMemory sets the memory limit. The kernel refuses (EBUSY) a limit
// below what the cgroup holds and cannot reclaim; den-init's kills may
// be bringing it down, so it tries again for a while.
func (c hostCgroups) setMemory(ctx context.Context, limit int64) error {
	name := "memory.limit_in_bytes"
	if c.v2 {
		name = "memory.max"
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		err := c.write("memory", name, strconv.FormatInt(limit, 10))
		if !errors.Is(err, syscall.EBUSY) {
			return err
		}
		select {
		case <-ctx.Done():
			return errdefs.WithHint(
				errdefs.Conflict("the sandbox uses more memory than the new limit allows"),
				"stop some of its processes, or choose a higher limit")
		case <-tick.C:
		}
	}
}

// oomKills is how many times the host's memory cgroup killed a process
// of the instance.
func (c hostCgroups) oomKills() (int, error) {
	name := "memory.oom_control"
	if c.v2 {
		name = "memory.events"
	}
	b, err := os.ReadFile(c.file("memory", name))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, " "); ok && k == "oom_kill" {
			return strconv.Atoi(strings.TrimSpace(v))
		}
	}
	return 0, nil
}

// HostStats reads what an instance used from its host cgroups alone: the
// CPU time and the memory charged to it, gVisor's own included. Unlike
// Stats it asks nothing of the sandbox, so it costs the sandbox no CPU:
// it is what periodic sampling uses.
func (r *Runtime) HostStats(id string) (sandbox.ResourceUsage, error) {
	cg, err := r.hostCgroups(id)
	if err != nil {
		return sandbox.ResourceUsage{}, err
	}
	cpu, err := cg.cpuTime()
	if err != nil {
		return sandbox.ResourceUsage{}, fmt.Errorf("reading the CPU time of %s: %w", id, err)
	}
	name := "memory.usage_in_bytes"
	if cg.v2 {
		name = "memory.current"
	}
	mem, err := readUint(cg.file("memory", name))
	if err != nil {
		return sandbox.ResourceUsage{}, fmt.Errorf("reading the memory of %s: %w", id, err)
	}
	use := sandbox.ResourceUsage{CPUTime: cpu, MemoryBytes: int64(mem), WorkingSetBytes: int64(mem)}
	// As cAdvisor counts it: what the kernel could not reclaim at once.
	inactive := "total_inactive_file "
	if cg.v2 {
		inactive = "inactive_file "
	}
	if b, err := os.ReadFile(cg.file("memory", "memory.stat")); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, inactive); ok {
				if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil && n < use.WorkingSetBytes {
					use.WorkingSetBytes -= n
				}
				break
			}
		}
	}
	if n, err := readUint(cg.file("pids", "pids.current")); err == nil {
		use.HostTasks = int(n)
	}
	return use, nil
}

// cpuTime is the CPU time charged to the cgroup: cpuacct.usage (ns) on
// v1, cpu.stat's usage_usec on v2.
func (c hostCgroups) cpuTime() (time.Duration, error) {
	if !c.v2 {
		n, err := readUint(c.file("cpuacct", "cpuacct.usage"))
		return time.Duration(n), err
	}
	b, err := os.ReadFile(c.file("cpu", "cpu.stat"))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "usage_usec "); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			return time.Duration(n) * time.Microsecond, err
		}
	}
	return 0, fmt.Errorf("no usage_usec in %s", c.file("cpu", "cpu.stat"))
}

func readUint(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
}

// removeCgroups removes instance id's host cgroups under root (one per
// hierarchy on cgroup v1, one on v2) where runsc left them: it removes
// them itself when it deletes an instance it knows, but not those of an
// instance it lost track of (a sandbox killed with the host's state, a
// boot cut short), and each such empty cgroup would stay until the host
// reboots. A cgroup whose processes are still exiting is tried again
// for a moment; what is still there then is the error.
func removeCgroups(ctx context.Context, root, id string) error {
	dirs, _ := filepath.Glob(filepath.Join(root, "*", cgroupsPath(id)))
	dirs = append(dirs, filepath.Join(root, cgroupsPath(id))) // v2
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	for _, d := range dirs {
		for {
			err := syscall.Rmdir(d)
			if err == nil || errors.Is(err, syscall.ENOENT) {
				break
			}
			if !errors.Is(err, syscall.EBUSY) || ctx.Err() != nil {
				return fmt.Errorf("removing host cgroup %s: %w", d, err)
			}
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	return nil
}
