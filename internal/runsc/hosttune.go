package runsc

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
)

// Every run and restore moves runsc into the instance's host cgroup and
// back. On cgroup v1 such a move waits for an RCU grace period, 8-16 ms
// on a 2-CPU VM (a move within one of the last is free), unless the
// kernel expedites grace periods: with /sys/kernel/rcu_expedited at 1 a
// move takes 0.1-0.2 ms. It is the host's setting, for every program on
// it, so dend only says so.

// adviseHost logs, once at start, a setting of the host that makes every
// boot and wake slower than it could be, if the host has it.
func adviseHost(log *slog.Logger, sysfs string) {
	if _, err := os.Stat(filepath.Join(sysfs, "fs/cgroup/cgroup.controllers")); err == nil {
		return // cgroup v2: a move needs no grace period
	}
	b, err := os.ReadFile(filepath.Join(sysfs, "kernel/rcu_expedited"))
	if err != nil || strings.TrimSpace(string(b)) != "0" {
		return
	}
	log.Info("this host's cgroup v1 moves wait for RCU grace periods, which adds 10-25 ms to every boot, wake and fork; `echo 1 > /sys/kernel/rcu_expedited` (as root, for the whole host) takes that off (see the README's host tuning)")
}
