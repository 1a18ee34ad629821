package initd

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"
)

// The holders' mark. The hold group (holdgroup.go) and lineage (see
// secretHolders) find a holder only as long as nothing in the sandbox
// undoes them: root can write a holder's pid into another cgroup, and a
// process whose parent died is den-init's child like any other. So the
// wrapper that starts a command given secrets also sets the no_new_privs
// flag on itself before it reads them (markHolder). The kernel (gVisor's
// sentry) passes the flag on to everything the command forks and execs,
// at any depth, and nothing can clear it, not even root; it is saved and
// restored with the sandbox's memory, and /proc/PID/status shows it. Its
// only effect is that execve grants no privileges: gVisor honours no
// set-user-ID bit here anyway, and file capabilities are not granted to
// a holder's programs.
//
// Any process may set the flag on itself (a browser's or sshd's
// sandboxed helpers do), so a flagged process counts as a holder only
// when nothing between it and den-init lacks the flag (ownMark): every
// ancestor of a true holder up to den-init has it, and a process's parent
// can only ever become one of its ancestors (or den-init) when the
// parent dies.

// markHolder sets no_new_privs on the calling thread, which must be the
// one that execs the command: the flag is per thread until execve leaves
// that thread alone.
func markHolder() error {
	runtime.LockOSThread() // never unlocked: this thread execs the command
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("marking the command as holding secrets (no_new_privs): %w", err)
	}
	return nil
}

// hasMark reports whether process pid has no_new_privs set, as
// /proc/PID/status shows it; false when it cannot be read.
func hasMark(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return false
	}
	for _, line := range bytes.Split(b, []byte{'\n'}) {
		if v, ok := bytes.CutPrefix(line, []byte("NoNewPrivs:")); ok {
			return string(bytes.TrimSpace(v)) == "1"
		}
	}
	return false
}

// markedHolders returns, of the live processes, those marked as holders: with
// the flag (flagged reports it), and no ancestor without it between them
// and den-init (self).
func markedHolders(live []procEntry, self int, flagged func(int) bool) map[int]bool {
	if flagged(self) {
		return nil // the flag is everyone's (the engine set it): it tells nothing
	}
	byPID := make(map[int]procEntry, len(live))
	flags := make(map[int]bool, len(live))
	for _, pe := range live {
		byPID[pe.pid] = pe
		flags[pe.pid] = flagged(pe.pid)
	}
	out := map[int]bool{}
	for _, pe := range live {
		if flags[pe.pid] && ownMark(pe, self, byPID, flags) {
			out[pe.pid] = true
		}
	}
	return out
}

// ownMark reports whether pe's flag may be den's: every ancestor up to
// den-init has it too. A parent that is no longer in the table, or that
// started after pe (its pid was reused since pe's parent died), ends the
// walk: pe's lineage above is lost, and the flag is taken for den's.
func ownMark(pe procEntry, self int, byPID map[int]procEntry, flags map[int]bool) bool {
	for hops := 0; hops <= len(byPID); hops++ {
		if pe.ppid <= 1 || pe.ppid == self {
			return true
		}
		parent, ok := byPID[pe.ppid]
		if !ok || parent.start > pe.start {
			return true
		}
		if !flags[parent.pid] {
			return false
		}
		pe = parent
	}
	return true
}
