package runsc

import (
	"bufio"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// On a cgroup v1 host runsc cannot create an instance's processes inside
// its cgroup, so every run and restore moves runsc into the cgroup and
// back out (runsc/cgroup RunInCgroup). A move takes the kernel's global
// cgroup threadgroup lock for writing, and that lock's first writer
// after a quiet spell waits for an RCU grace period: 8-20 ms on a 2-CPU
// VM. The lock stays in its writer-ready state until a grace period
// passes with no writer, and runsc's two moves are 25-60 ms apart, so
// each boot usually waits twice.
//
// A movePacer spares boots those waits. While one is held it re-joins
// dend's own cgroup (a move to where dend already is, which migrates
// nothing) every few milliseconds, so the lock never falls back to its
// reader-optimized state and runsc's moves find it ready. Only the
// pacer's first move after it starts waits, and it waits while runsc is
// still starting up. The price: while a boot is under way, a fork, exec
// or exit anywhere on the host takes the lock's slower shared path (an
// atomic count), as on a host mounted with cgroup's favordynmods option.
// Hosts on cgroup v2 need none of this: runsc clones into the cgroup.
type movePacer struct {
	// procs finds a cgroup.procs file of one of dend's own v1 cgroups,
	// anew each time the pacer starts: were dend moved to another cgroup
	// meanwhile, re-joining the old one would undo that.
	procs func() (string, error)
	every time.Duration // how often it moves while held
	log   *slog.Logger

	mu      sync.Mutex
	holders int
	stop    chan struct{} // closed to end the running pacer; nil when none runs
}

// paceEvery is well under the shortest grace period seen here (about 4
// ms on an idle host), so the lock cannot settle between two moves.
const paceEvery = 2 * time.Millisecond

// newMovePacer returns a pacer for this host, or nil when boots would
// gain nothing from one: cgroup v2, or expedited grace periods already.
// sysfs and procSelfCgroup are /sys and /proc/self/cgroup but in tests.
func newMovePacer(log *slog.Logger, sysfs, procSelfCgroup string) *movePacer {
	if !graceWaits(sysfs) {
		return nil
	}
	find := func() (string, error) { return ownProcsFile(filepath.Join(sysfs, "fs/cgroup"), procSelfCgroup) }
	procs, err := find()
	if err != nil {
		log.Info("cgroup moves will wait for RCU grace periods at every boot, wake and fork: "+
			"no cgroup v1 hierarchy of dend's own to keep them ready", "err", err)
		return nil
	}
	log.Info("this host's cgroup v1 moves wait for RCU grace periods; dend keeps the cgroup lock ready while runsc boots, wakes and forks instances (--no-cgroup-pacer turns this off)",
		"procs", procs)
	return &movePacer{procs: find, every: paceEvery, log: log}
}

// graceWaits reports whether a cgroup move on this host waits for a full
// RCU grace period: cgroup v1, grace periods not expedited.
func graceWaits(sysfs string) bool {
	if _, err := os.Stat(filepath.Join(sysfs, "fs/cgroup/cgroup.controllers")); err == nil {
		return false // cgroup v2 only
	}
	b, err := os.ReadFile(filepath.Join(sysfs, "kernel/rcu_expedited"))
	return err == nil && strings.TrimSpace(string(b)) == "0"
}

// ownProcsFile is the cgroup.procs file of the cgroup dend is in under
// one v1 hierarchy, preferring controllers with the least to do on a
// move, read from /proc/self/cgroup and found under root (/sys/fs/cgroup).
func ownProcsFile(root, procSelfCgroup string) (string, error) {
	f, err := os.Open(procSelfCgroup)
	if err != nil {
		return "", err
	}
	defer f.Close()
	paths := map[string]string{} // controller → dend's path under it
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// hierarchy-ID:controller-list:cgroup-path
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 || parts[1] == "" {
			continue // cgroup v2's line, or not a hierarchy line
		}
		for _, c := range strings.Split(parts[1], ",") {
			paths[c] = parts[2]
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	// A move to where dend already is migrates nothing under any
	// controller; these would have the least to check if it did.
	for _, c := range []string{"pids", "devices", "freezer", "blkio", "cpuacct", "cpu", "memory", "cpuset"} {
		p, ok := paths[c]
		if !ok {
			continue
		}
		procs := filepath.Join(root, c, p, "cgroup.procs")
		if _, err := os.Stat(procs); err == nil {
			return procs, nil
		}
	}
	return "", fmt.Errorf("none of dend's cgroup v1 hierarchies is mounted under %s", root)
}

// hold keeps cgroup moves ready until release is called. Holds nest: the
// pacer runs while any is held. A nil pacer does nothing.
func (p *movePacer) hold() (release func()) {
	if p == nil {
		return func() {}
	}
	p.mu.Lock()
	p.holders++
	if p.holders == 1 {
		p.stop = make(chan struct{})
		go p.run(p.stop)
	}
	p.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			p.holders--
			if p.holders == 0 {
				close(p.stop)
				p.stop = nil
			}
		})
	}
}

// run moves dend into its own cgroup every p.every until stop closes.
func (p *movePacer) run(stop <-chan struct{}) {
	procs, err := p.procs()
	if err != nil {
		p.log.Warn("keeping cgroup moves ready for a boot", "err", err)
		return
	}
	// Appending is all one to cgroupfs, and leaves each move in a plain
	// file's record (the tests).
	f, err := os.OpenFile(procs, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		p.log.Warn("keeping cgroup moves ready for a boot", "err", err)
		return
	}
	defer f.Close()
	t := time.NewTicker(p.every)
	defer t.Stop()
	for {
		// "0" is the writer itself: dend, into the cgroup it is in.
		if _, err := f.Write([]byte("0")); err != nil {
			p.log.Warn("keeping cgroup moves ready for a boot", "err", err)
			return
		}
		select {
		case <-stop:
			return
		case <-t.C:
		}
	}
}
