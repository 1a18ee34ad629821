package runsc

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/den-dev/den/internal/sandbox"
)

// Watching an instance from the host, without waking it: every call into
// the sandbox (a den-init request, `runsc events`) wakes gVisor, which
// costs the host about a millisecond of CPU each time; reading the
// instance's host cgroups costs it nothing. dend reads them every second
// for every running sandbox, so a watch holds the files open: reading one
// again from its start is a single pread (under a microsecond), where
// opening it by path each time took about 12 µs, most of a watch's cost.

// A memory threshold is signalled by the kernel on cgroup v1 (an eventfd
// registered in cgroup.event_control). Cgroup v2 has no such signal: its
// memory.events tells only of memory.high and memory.max, and a
// memory.high at the threshold would throttle the sandbox there. So on v2
// the watch reads memory.current itself, as often as the distance to the
// threshold requires were memory to grow as fast as it can: the nearer,
// the oftener. Each read is one pread of dend's, and never wakes the
// sandbox.
const (
	// fastestGrowth is how fast a sandbox's host memory is assumed to
	// grow at most (as den-init assumes inside, internal/initd).
	fastestGrowth = 2 << 30 // bytes a second
	pollMin       = 10 * time.Millisecond
	pollMax       = time.Second
)

// hostWatch is a watch over one instance's host cgroups.
type hostWatch struct {
	id      string
	v2      bool
	crossed chan struct{} // nil without a threshold
	stop    chan struct{} // closed by Stop

	// mu keeps Stop from closing the descriptors under a read.
	mu     sync.Mutex
	cpu    int      // cpuacct.usage (v1) or cpu.stat (v2); -1 when closed
	memory int      // memory.usage_in_bytes (v1) or memory.current (v2); -1 when closed
	events *os.File // the memory threshold's eventfd (v1), or nil
}

var _ sandbox.HostWatch = (*hostWatch)(nil)

// WatchHost starts watching instance id's host cgroups until Stop. With
// threshold > 0 Crossed receives every time the instance's host memory
// (as Usage counts it) crosses threshold, upward or downward: the kernel
// signals it on cgroup v1, the watch polls for it on v2 (see above).
// Crossed is closed when the watch stops or, on v1, when the instance's
// cgroup goes.
func (r *Runtime) WatchHost(id string, threshold int64) (sandbox.HostWatch, error) {
	cg, err := r.hostCgroups(id)
	if err != nil {
		return nil, err
	}
	return watchHost(cg, id, threshold, cg.v2)
}

// watchHost watches cg; poll reads the memory for a threshold rather
// than have the kernel signal it (which needs v1).
func watchHost(cg hostCgroups, id string, threshold int64, poll bool) (*hostWatch, error) {
	var err error
	w := &hostWatch{id: id, v2: cg.v2, cpu: -1, memory: -1, stop: make(chan struct{})}
	cpuFile, memoryFile := cg.file("cpuacct", "cpuacct.usage"), cg.file("memory", "memory.usage_in_bytes")
	if cg.v2 {
		cpuFile, memoryFile = cg.file("cpu", "cpu.stat"), cg.file("memory", "memory.current")
	}
	if w.cpu, err = openReadOnly(cpuFile); err == nil {
		w.memory, err = openReadOnly(memoryFile)
	}
	switch {
	case err != nil || threshold <= 0:
	case poll:
		w.pollMemory(threshold)
	default:
		err = w.watchMemory(cg, threshold)
	}
	if err != nil {
		w.Stop()
		return nil, fmt.Errorf("watching %s from the host: %w", id, err)
	}
	return w, nil
}

// watchMemory registers threshold on the memory usage file with a new
// eventfd, and relays its signals to w.crossed.
func (w *hostWatch) watchMemory(cg hostCgroups, threshold int64) error {
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return err
	}
	events := os.NewFile(uintptr(efd), "memory-threshold") // non-blocking: reads go through the poller
	ctl := fmt.Sprintf("%d %d %d", efd, w.memory, threshold)
	if err := cg.write("memory", "cgroup.event_control", ctl); err != nil {
		events.Close()
		return err
	}
	w.events = events
	w.crossed = make(chan struct{}, 1)
	go func() {
		defer close(w.crossed)
		buf := make([]byte, 8)
		for {
			if _, err := events.Read(buf); err != nil {
				return // closed by Stop
			}
			select {
			case w.crossed <- struct{}{}:
			default: // one pending signal stands for many
			}
		}
	}()
	return nil
}

// pollMemory reads the instance's memory until Stop, as often as the
// distance to threshold requires, and relays each crossing to w.crossed.
func (w *hostWatch) pollMemory(threshold int64) {
	w.crossed = make(chan struct{}, 1)
	read := func() (int64, error) {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.memory < 0 {
			return 0, errors.New("stopped")
		}
		var buf [32]byte
		b, err := preadFromStart(w.memory, buf[:])
		if err != nil {
			return 0, err
		}
		return parseInt(b)
	}
	go func() {
		defer close(w.crossed)
		pollThreshold(read, threshold, w.stop, w.crossed)
	}()
}

// pollThreshold reads memory with read until stop closes, and sends on
// crossed (without blocking: one pending signal stands for many) each
// time it goes to or past threshold from below, or back under it. A read
// that fails (the cgroup went) is tried again at the slowest pace.
func pollThreshold(read func() (int64, error), threshold int64, stop <-chan struct{}, crossed chan<- struct{}) {
	above := false
	first := true
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		next := pollMax
		if memory, err := read(); err == nil {
			now := memory >= threshold
			if now != above && !first {
				select {
				case crossed <- struct{}{}:
				default:
				}
			}
			above, first = now, false
			if !above {
				left := time.Duration(float64(threshold-memory) / fastestGrowth * float64(time.Second))
				next = min(max(left, pollMin), pollMax)
			}
		}
		t.Reset(next)
	}
}

// Usage is what the instance uses now as its host cgroups count it: the
// CPU time of all its processes so far, and its memory, page cache
// included. It never wakes the sandbox.
func (w *hostWatch) Usage() (cpu time.Duration, memory int64, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cpu < 0 {
		return 0, 0, fmt.Errorf("reading the host usage of %s: the watch is stopped", w.id)
	}
	var buf [512]byte // cpu.stat fits, usage_usec first
	b, err := preadFromStart(w.cpu, buf[:])
	if err == nil {
		if w.v2 {
			cpu, err = cpuStatUsage(b)
		} else {
			var ns int64
			ns, err = parseInt(b)
			cpu = time.Duration(ns)
		}
	}
	if err == nil {
		if b, err = preadFromStart(w.memory, buf[:]); err == nil {
			memory, err = parseInt(b)
		}
	}
	if err != nil {
		return 0, 0, fmt.Errorf("reading the host usage of %s: %w", w.id, err)
	}
	return cpu, memory, nil
}

// Crossed receives when the instance's memory crossed the threshold: nil
// without one.
func (w *hostWatch) Crossed() <-chan struct{} { return w.crossed }

// Stop ends the watch: closing the eventfd also removes the threshold
// from the cgroup.
func (w *hostWatch) Stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	if w.events != nil {
		w.events.Close()
		w.events = nil
	}
	for _, fd := range []*int{&w.cpu, &w.memory} {
		if *fd >= 0 {
			unix.Close(*fd)
			*fd = -1
		}
	}
}

func openReadOnly(path string) (int, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return fd, nil
}

// preadFromStart reads a cgroup file from its start into buf: the kernel
// makes its contents afresh for every read at offset 0. A cgroup removed
// since it was opened reads as ENODEV.
func preadFromStart(fd int, buf []byte) ([]byte, error) {
	for {
		n, err := unix.Pread(fd, buf, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return buf[:n], nil
	}
}

func parseInt(b []byte) (int64, error) {
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

// cpuStatUsage reads usage_usec from a cgroup v2 cpu.stat.
func cpuStatUsage(b []byte) (time.Duration, error) {
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "usage_usec "); ok {
			us, err := strconv.ParseInt(v, 10, 64)
			return time.Duration(us) * time.Microsecond, err
		}
	}
	return 0, errors.New("no usage_usec in cpu.stat")
}
