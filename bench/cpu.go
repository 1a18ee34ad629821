package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Where host CPU goes during a load: the benchmark's own dend, the
// sandboxes under load, idle ones beside them, and everything else on
// the host. On a shared machine throughput moves with what else runs;
// CPU per exec does not, so it tells den's own costs apart from noise.

// cpuUse is CPU time used so far, by whom.
type cpuUse struct {
	dend, busy, idle time.Duration
	client           time.Duration // this benchmark's process
	host             time.Duration // every CPU of the host, not idle
}

// cpuMeter reads cpuUse for one dend and two groups of host cgroups.
type cpuMeter struct {
	dendPid    int
	busy, idle []string // host cgroups
}

func (m cpuMeter) read() cpuUse {
	sum := func(cgs []string) (total time.Duration) {
		for _, cg := range cgs {
			if d, err := cgroupCPU(cg); err == nil {
				total += d
			}
		}
		return total
	}
	return cpuUse{dend: processCPU(m.dendPid), busy: sum(m.busy), idle: sum(m.idle),
		client: processCPU(os.Getpid()), host: hostBusy()}
}

func (u cpuUse) sub(v cpuUse) cpuUse {
	return cpuUse{dend: u.dend - v.dend, busy: u.busy - v.busy, idle: u.idle - v.idle,
		client: u.client - v.client, host: u.host - v.host}
}

// den is the CPU den spent: its dend and its sandboxes.
func (u cpuUse) den() time.Duration { return u.dend + u.busy + u.idle }

// rest is the CPU of everything else on the host: other programs, and
// kernel work no process was charged for.
func (u cpuUse) rest() time.Duration { return u.host - u.den() - u.client }

// perExec is "dend 1.20 + busy sandboxes 3.40 + idle sandboxes 0.10 =
// 4.70 ms of CPU per exec; client 0.50".
func (u cpuUse) perExec(n int) string {
	per := func(d time.Duration) string {
		return fmt.Sprintf("%.2f", float64(d)/float64(time.Millisecond)/float64(max(n, 1)))
	}
	return fmt.Sprintf("dend %s + busy sandboxes %s + idle sandboxes %s = %s ms of CPU per exec; client %s",
		per(u.dend), per(u.busy), per(u.idle), per(u.den()), per(u.client))
}

// userHZ is the unit of CPU times in /proc: USER_HZ, 100 on Linux.
const userHZ = 100

// processCPU is the CPU time process pid (all its threads) has used so
// far, or 0 when it cannot be read.
func processCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command name, which may hold spaces.
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / userHZ
}

// hostBusy is the CPU time every CPU of the host has spent other than
// idle or waiting for I/O, so far.
func hostBusy() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal ...
	var busy int64
	for i, v := range f[1:] {
		n, _ := strconv.ParseInt(v, 10, 64)
		if i != 3 && i != 4 && i < 8 { // not idle, iowait; guest time is in user already
			busy += n
		}
	}
	return time.Duration(busy) * time.Second / userHZ
}

// cgroupCPU is the CPU time the processes of host cgroup path (a spec's
// cgroupsPath) have used so far, under cgroup v1 or v2.
func cgroupCPU(path string) (time.Duration, error) {
	b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/cpuacct", path, "cpuacct.usage"))
	if err == nil {
		ns, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		return time.Duration(ns), err
	}
	if !errors.Is(err, os.ErrNotExist) {
		return 0, err
	}
	if b, err = os.ReadFile(filepath.Join("/sys/fs/cgroup", path, "cpu.stat")); err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "usage_usec "); ok {
			us, err := strconv.ParseInt(v, 10, 64)
			return time.Duration(us) * time.Microsecond, err
		}
	}
	return 0, fmt.Errorf("no usage_usec in %s's cpu.stat", path)
}
