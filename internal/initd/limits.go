package initd

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/guest"
	"github.com/den-dev/den/internal/initd/httpio"
)

// The limits den-init enforces inside a sandbox (guest.Limits), where
// gVisor alone would stop the whole sandbox:
//
//   - Processes: RLIMIT_NPROC, which gVisor enforces on fork and clone
//     (EAGAIN) for every task without CAP_SYS_RESOURCE. (gVisor's pids
//     cgroup would count the whole sandbox, but with cgroup v1 it charges
//     a fork to a random one of the task's hierarchies, so it stops only
//     one fork in seven.) den-init keeps CAP_SYS_RESOURCE, so a fork bomb
//     can never leave it unable to start a thread, which the Go runtime
//     does not survive, or a command. Its children must not have it: they
//     are forked from one thread that dropped it from its bounding set, so
//     what they exec has none, and cannot raise the limit either. The
//     limit counts per user, den-init's threads among root's.
//   - Memory: gVisor has no OOM killer; its host cgroup's would kill the
//     sandbox. den-init watches what gVisor counts for the sandbox, plus
//     gVisor's host cost per process, and past the limit kills the
//     largest process, as the kernel would. It checks more often the
//     closer the sandbox is to its limit.
//
// Both are checked only while some process but den-init runs: with none,
// neither can change and neither has anyone to act on, and an idle
// sandbox must cost its host nothing (each check wakes the sandbox, and
// four a second cost it 7 ms of host CPU per second). The Reaper says
// when the last child goes and when one starts.
//
// While processes run but sit idle, the host can do the watching without
// waking the sandbox (its memory cgroup signals a threshold; its CPU time
// shows activity): it then turns the checks off (PUT /v1/limits/checks)
// and back on when the sandbox nears its memory limit or gets busy. Every
// POST /v1/limits turns them on again, so a restored den-init, or one
// whose host does not watch, checks as before.

const (
	// perProcessCost is what gVisor spends on the host for each process
	// beyond what the process uses (about 450 KiB measured with systrap;
	// threads cost next to nothing).
	perProcessCost = 512 << 10
	// fastestGrowth paces the memory checks: memory is assumed to grow no
	// faster than this (a single allocating thread reached 0.75 GiB/s).
	fastestGrowth = 2 << 30 // bytes per second
	minCheck      = 5 * time.Millisecond
	maxCheck      = 250 * time.Millisecond
	// killGrace is how long a killed process's memory may take to be
	// counted free (gVisor gives it back in the background) before
	// another process is killed in its place, unless use grows further.
	killGrace = 2 * time.Second
)

// Log keys.
const (
	keyUsed  = "used"
	keyLimit = "limit"
	keyRSS   = "rss"
)

// limiter holds den-init's limits and the means to keep them.
type limiter struct {
	log     *slog.Logger
	hooks   limitHooks
	cgroups string // where gVisor's cgroup controllers are mounted; "" when none
	// forks takes fork functions to the thread children are forked from,
	// which cannot hand them CAP_SYS_RESOURCE; nil without one, when
	// processes cannot be limited.
	forks chan forkReq
	stop  chan struct{}
	done  chan struct{}

	mu     sync.Mutex
	limits guest.Limits
	// checks is whether to check at all while processes run: false while
	// the host watches instead.
	checks   bool
	changed  chan struct{} // closed and replaced when limits or checks change
	victim   int           // the last process killed for memory, while it may still be going
	victimAt time.Time
	usedAt   int64 // what the sandbox used when the victim was killed
	oomKills int
	// checkCount is how many checks were made: each one a wake of the
	// sandbox (Info.LimitChecks).
	checkCount int64
}

type forkReq struct {
	fork func() (int, error)
	done chan forkResult
}

type forkResult struct {
	pid int
	err error
}

// newLimiter sets up limits on gVisor's cgroups mounted at dir. Without
// them (den-init on a host, where dir is "", or an instance older than
// limits) nothing can be limited.
func newLimiter(dir string, hooks limitHooks, log *slog.Logger) *limiter {
	l := &limiter{
		log: log, hooks: hooks, checks: true,
		changed: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{}),
	}
	if dir == "" {
		close(l.done)
		return l
	}
	if _, err := os.Stat(filepath.Join(dir, "memory", "memory.usage_in_bytes")); err != nil {
		log.Warn("memory cannot be limited: no memory cgroup", keyErr, err)
	} else {
		l.cgroups = dir
	}
	if err := l.startForker(); err != nil {
		log.Warn("processes cannot be limited", keyErr, err)
	}
	go l.watch()
	return l
}

// startForker starts the thread children are forked from, which drops
// CAP_SYS_RESOURCE from its bounding set: what it forks and execs runs
// without it, under RLIMIT_NPROC, while den-init keeps it. The thread
// stays locked to its goroutine for good, so the Go runtime never runs
// anything else on it, and starts its new threads elsewhere.
func (l *limiter) startForker() error {
	if !hasEffective(unix.CAP_SYS_RESOURCE) {
		return errors.New("den-init lacks CAP_SYS_RESOURCE, so a process limit would hold it too")
	}
	l.forks = make(chan forkReq)
	ready := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, unix.CAP_SYS_RESOURCE, 0, 0, 0); err != nil {
			ready <- fmt.Errorf("dropping CAP_SYS_RESOURCE from the forking thread: %w", err)
			return
		}
		ready <- nil
		for {
			select {
			case req := <-l.forks:
				pid, err := req.fork()
				req.done <- forkResult{pid, err}
			case <-l.stop:
				return
			}
		}
	}()
	if err := <-ready; err != nil {
		l.forks = nil
		return err
	}
	return nil
}

// hasEffective reports whether den-init holds capability c.
func hasEffective(c int) bool {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return false
	}
	return data[c/32].Effective&(1<<(c%32)) != 0
}

// fork runs fork, which forks a child, so that the child is under the
// process limit.
func (l *limiter) fork(fork func() (int, error)) (int, error) {
	if l.forks == nil {
		return fork()
	}
	req := forkReq{fork: fork, done: make(chan forkResult, 1)}
	select {
	case l.forks <- req:
	case <-l.stop:
		return 0, errdefs.Unavailable("den-init is stopping")
	}
	r := <-req.done
	return r.pid, r.err
}

// nearPIDs reports whether the sandbox is at (within 5% of) its process
// limit.
func (l *limiter) nearPIDs() bool {
	l.mu.Lock()
	limit := l.limits.PIDs
	l.mu.Unlock()
	n, ok := l.tasks()
	return ok && limit > 0 && n >= limit-limit/20
}

// set makes l what den-init enforces.
func (l *limiter) set(lim guest.Limits) error {
	if lim.MemoryBytes < 0 || lim.PIDs < 0 {
		return errdefs.Invalid("limits cannot be negative")
	}
	if lim.PIDs > 0 && l.forks == nil || lim.MemoryBytes > 0 && l.cgroups == "" {
		return errdefs.WithHint(errdefs.Unavailable("den-init cannot enforce limits here: the sandbox lacks cgroups or capabilities for them"),
			"recreate the sandbox with a current den")
	}
	if l.forks != nil {
		if err := setNProc(lim.PIDs); err != nil {
			return fmt.Errorf("setting the process limit: %w", err)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.limits, l.checks = lim, true
	l.changedLocked()
	return nil
}

// setChecks turns the checks on or off while processes run (see the
// comment at the top).
func (l *limiter) setChecks(on bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.checks != on {
		l.checks = on
		l.changedLocked()
	}
}

func (l *limiter) changedLocked() {
	close(l.changed)
	l.changed = make(chan struct{})
}

func (l *limiter) close() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	<-l.done
}

func (l *limiter) kills() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.oomKills
}

// checksMade is how many times den-init checked the limits so far.
func (l *limiter) checksMade() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.checkCount
}

// watch checks the limits until close, as often as the memory left
// requires, while anything but den-init runs. The Server's hooks
// (overMemory, atPIDs) act on what it finds.
func (l *limiter) watch() {
	defer close(l.done)
	for {
		l.mu.Lock()
		lim, checks, changed := l.limits, l.checks, l.changed
		l.mu.Unlock()
		idle, woken := false, (<-chan struct{})(nil)
		if l.hooks.idle != nil {
			idle, woken = l.hooks.idle()
		}
		var wait <-chan time.Time
		if checks && !idle && (lim.MemoryBytes > 0 || lim.PIDs > 0) {
			wait = time.After(l.check(lim))
		}
		select {
		case <-l.stop:
			return
		case <-changed:
		case <-woken:
		case <-wait:
		}
	}
}

// limitHooks are what the Server does when the sandbox is over its
// memory limit (kill a process, and say which), and when it is at its
// process limit.
type limitHooks struct {
	overMemory func(used, limit int64) (victim int, ok bool)
	atPIDs     func()
	// idle reports whether no process but den-init runs, and returns a
	// channel closed when that changes; nil: never idle.
	idle func() (bool, <-chan struct{})
}

// check looks at the sandbox once and returns when to look again.
func (l *limiter) check(lim guest.Limits) time.Duration {
	l.mu.Lock()
	l.checkCount++
	l.mu.Unlock()
	next := maxCheck
	if n, ok := l.tasks(); ok && lim.PIDs > 0 {
		// A fork bomb whose forks fail dies down by itself: look often
		// when close, and count "within 5%" as at the limit.
		if n >= lim.PIDs-lim.PIDs/20 { // see nearPIDs
			l.hooks.atPIDs()
		}
		if n >= lim.PIDs*3/4 {
			next = 2 * minCheck
		}
	}
	if lim.MemoryBytes <= 0 {
		return next
	}
	used, err := l.memoryUsed()
	if err != nil {
		l.log.Warn("cannot read the sandbox's memory use", keyErr, err)
		return next
	}
	if used > lim.MemoryBytes && !l.killPending(used, lim.MemoryBytes) {
		if victim, ok := l.hooks.overMemory(used, lim.MemoryBytes); ok {
			l.mu.Lock()
			l.victim, l.victimAt, l.usedAt = victim, time.Now(), used
			l.oomKills++
			l.mu.Unlock()
		}
		return minCheck
	}
	left := time.Duration(float64(lim.MemoryBytes-used) / fastestGrowth * float64(time.Second))
	return min(max(left, minCheck), next)
}

// memoryUsed is what the sandbox uses against its memory limit: what
// gVisor counts for its processes, and its host cost per process.
func (l *limiter) memoryUsed() (int64, error) {
	used, err := readInt64(filepath.Join(l.cgroups, "memory", "memory.usage_in_bytes"))
	if err != nil {
		return 0, err
	}
	return used + int64(countProcs())*perProcessCost, nil
}

// tasks counts the sandbox's tasks but den-init's threads (gVisor's pids
// cgroup counts them right, though it does not limit them right).
func (l *limiter) tasks() (int, bool) {
	if l.cgroups == "" {
		return 0, false
	}
	cur, err := readInt64(filepath.Join(l.cgroups, "pids", "pids.current"))
	return int(cur) - ownThreads(), err == nil
}

// setNProc makes n the RLIMIT_NPROC of den-init, which its children
// inherit, and of every process already running; 0 lifts it. den-init's
// own threads count against the limit as root's, so they are added.
func setNProc(n int) error {
	lim := unix.Rlimit{Cur: unix.RLIM_INFINITY, Max: unix.RLIM_INFINITY}
	if n > 0 {
		lim.Cur = uint64(n + ownThreads())
		lim.Max = lim.Cur
	}
	if err := unix.Prlimit(0, unix.RLIMIT_NPROC, &lim, nil); err != nil {
		return err
	}
	self := os.Getpid()
	for _, pe := range readProcTable() {
		if pe.pid != self && !pe.zombie {
			_ = unix.Prlimit(pe.pid, unix.RLIMIT_NPROC, &lim, nil) // gone meanwhile: fine
		}
	}
	return nil
}

// ownThreads is how many threads den-init runs.
func ownThreads() int {
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return 0
	}
	return len(ents)
}

// killPending reports whether the last process killed for memory may
// still be freeing it: it is still there, or it went less than killGrace
// ago and the sandbox uses about what it did then (new processes may
// have started meanwhile; a hog would take more).
func (l *limiter) killPending(used, limit int64) bool {
	l.mu.Lock()
	victim, at, before := l.victim, l.victimAt, l.usedAt
	l.mu.Unlock()
	if victim == 0 || time.Since(at) > killGrace {
		return false
	}
	if b, err := os.ReadFile("/proc/" + strconv.Itoa(victim) + "/stat"); err == nil {
		if pe, ok := parseStat(victim, string(b)); ok && !pe.zombie {
			return true
		}
	}
	return used <= before+max(8<<20, limit/32)
}

// countProcs counts the processes in /proc.
func countProcs() int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range ents {
		if c := e.Name()[0]; c >= '0' && c <= '9' {
			n++
		}
	}
	return n
}

func readInt64(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

// rss is how much memory process pid holds, from /proc/<pid>/statm.
func rss(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/statm")
	if err != nil {
		return -1
	}
	f := bytes.Fields(b)
	if len(f) < 2 {
		return -1
	}
	pages, err := strconv.ParseInt(string(f[1]), 10, 64)
	if err != nil {
		return -1
	}
	return pages * int64(os.Getpagesize())
}

// killForMemory kills the largest process but den-init, blaming the
// process den-init started it belongs to, and returns its pid.
func (s *Server) killForMemory(used, limit int64) (int, bool) {
	table := readProcTable()
	self := os.Getpid()
	victim, most := procEntry{}, int64(-1)
	for _, pe := range table {
		if pe.pid == self || pe.pid == 1 || pe.zombie {
			continue
		}
		if r := rss(pe.pid); r > most {
			victim, most = pe, r
		}
	}
	if most < 0 {
		s.log.Warn("over the memory limit with no process to kill", keyUsed, used, keyLimit, limit)
		return 0, false
	}
	if p := s.ownerOf(victim.pid, table); p != nil {
		p.hitLimit(guest.LimitMemory) // before the kill: its exit is then reported with the reason
	}
	if err := unix.Kill(victim.pid, sigKILL); err != nil {
		return 0, false
	}
	s.log.Warn("out of memory: killed the largest process", keyPID, victim.pid, keyRSS, most, keyUsed, used, keyLimit, limit)
	return victim.pid, true
}

// blamePIDs marks the running process den-init started whose tree holds
// the most processes as the one that ran into the process limit.
func (s *Server) blamePIDs() {
	table := readProcTable()
	count := make(map[*proc]int)
	for _, pe := range table {
		if p := s.ownerOf(pe.pid, table); p != nil && !pe.zombie {
			count[p]++
		}
	}
	var worst *proc
	for p, n := range count {
		if worst == nil || n > count[worst] {
			worst = p
		}
	}
	if worst != nil {
		worst.hitLimit(guest.LimitPIDs)
	}
}

// ownerOf finds the running process den-init started that pid belongs
// to: pid itself, its process group or session leader, or an ancestor.
func (s *Server) ownerOf(pid int, table []procEntry) *proc {
	s.mu.Lock()
	byPID := make(map[int]*proc)
	for _, p := range s.procs {
		if !p.hasExited() {
			byPID[p.pid] = p
		}
	}
	s.mu.Unlock()
	entries := make(map[int]procEntry, len(table))
	for _, pe := range table {
		entries[pe.pid] = pe
	}
	for q, hops := pid, 0; q > 1 && hops <= len(table); hops++ {
		if p, ok := byPID[q]; ok {
			return p
		}
		pe, ok := entries[q]
		if !ok {
			return nil
		}
		if p, ok := byPID[pe.pgrp]; ok {
			return p
		}
		if p, ok := byPID[pe.session]; ok {
			return p
		}
		q = pe.ppid
	}
	return nil
}

// hitLimit records that p ran into limit; the first one found stays.
func (p *proc) hitLimit(limit string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.limitHit == "" {
		p.limitHit = limit
		p.notifyLocked()
	}
}

func (s *Server) handleLimitChecks(w http.ResponseWriter, r *http.Request) error {
	var req guest.LimitChecks
	if err := httpio.DecodeJSON(w, r, &req); err != nil {
		return err
	}
	s.limits.setChecks(req.On)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) handleLimits(w http.ResponseWriter, r *http.Request) error {
	var lim guest.Limits
	if err := httpio.DecodeJSON(w, r, &lim); err != nil {
		return err
	}
	if err := s.setLimits(lim); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// setLimits enforces lim from now on and, when it names the resolver,
// writes resolv.conf.
func (s *Server) setLimits(lim guest.Limits) error {
	if err := s.limits.set(lim); err != nil {
		return err
	}
	if lim.ResolvConf != "" {
		// A sandbox that made the file something den-init cannot
		// replace (a directory) resolves nothing, as it chose; it
		// still boots.
		if err := s.writeResolvConf(lim.ResolvConf); err != nil {
			s.log.Warn("setting the resolver", "err", err)
		}
	}
	return nil
}
