package runsc

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Watching an instance from the host, without waking it: every call into
// the sandbox (a den-init request, `runsc events`) wakes gVisor, which
// costs the host about a millisecond of CPU each time; reading the
// instance's host cgroups costs it nothing.

// HostUsage is what instance id uses now as its host cgroups count it:
// the CPU time of all its processes so far, and its memory, page cache
// included. Unlike Stats it never wakes the sandbox.
func (r *Runtime) HostUsage(id string) (cpu time.Duration, memory int64, err error) {
	cg, err := r.hostCgroups(id)
	if err != nil {
		return 0, 0, err
	}
	if cg.v2 {
		if cpu, err = cpuStatUsage(cg.file("cpu", "cpu.stat")); err == nil {
			memory, err = readInt(cg.file("memory", "memory.current"))
		}
	} else {
		var ns int64
		if ns, err = readInt(cg.file("cpuacct", "cpuacct.usage")); err == nil {
			cpu = time.Duration(ns)
			memory, err = readInt(cg.file("memory", "memory.usage_in_bytes"))
		}
	}
	if err != nil {
		return 0, 0, fmt.Errorf("reading the host usage of %s: %w", id, err)
	}
	return cpu, memory, nil
}

// WatchMemory has the kernel signal on crossed every time instance id's
// host memory use (as HostUsage counts it) crosses threshold, upward or
// downward, until stop is called; also once when the instance's cgroup
// goes. It needs cgroup v1's memory thresholds: errors.ErrUnsupported
// under v2.
func (r *Runtime) WatchMemory(id string, threshold int64) (crossed <-chan struct{}, stop func(), err error) {
	cg, err := r.hostCgroups(id)
	if err != nil {
		return nil, nil, err
	}
	if cg.v2 {
		return nil, nil, fmt.Errorf("watching the memory of %s: %w", id, errors.ErrUnsupported)
	}
	usage, err := os.Open(cg.file("memory", "memory.usage_in_bytes"))
	if err != nil {
		return nil, nil, fmt.Errorf("watching the memory of %s: %w", id, err)
	}
	// The kernel needs the usage file only to register the threshold.
	defer usage.Close()
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, nil, fmt.Errorf("watching the memory of %s: %w", id, err)
	}
	events := os.NewFile(uintptr(efd), "memory-threshold") // non-blocking: reads go through the poller
	ctl := fmt.Sprintf("%d %d %d", efd, usage.Fd(), threshold)
	if err := cg.write("memory", "cgroup.event_control", ctl); err != nil {
		events.Close()
		return nil, nil, fmt.Errorf("watching the memory of %s: %w", id, err)
	}
	ch := make(chan struct{}, 1)
	go func() {
		defer close(ch)
		buf := make([]byte, 8)
		for {
			if _, err := events.Read(buf); err != nil {
				return // closed by stop
			}
			select {
			case ch <- struct{}{}:
			default: // one pending signal stands for many
			}
		}
	}()
	// Closing the eventfd also removes the threshold from the cgroup.
	return ch, func() { events.Close() }, nil
}

func readInt(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

// cpuStatUsage reads usage_usec from a cgroup v2 cpu.stat.
func cpuStatUsage(path string) (time.Duration, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "usage_usec "); ok {
			us, err := strconv.ParseInt(v, 10, 64)
			return time.Duration(us) * time.Microsecond, err
		}
	}
	return 0, fmt.Errorf("no usage_usec in %s", path)
}
