package users

import (
	"context"
	"fmt"
	"runtime"
	"syscall"
	"unsafe"
)

// Acting as a user: den-init does a call with a user's permissions
// (their uid, gid and supplementary groups, from the sandbox's passwd
// and group files), so the kernel refuses what the user could not do,
// and what is made belongs to them.
//
// The credentials are taken by one OS thread only, for the one call:
// Linux (and gVisor) keep them per thread, and the raw set*id system
// calls change the calling thread alone (Go's syscall.Setresuid would
// change every thread). Only the effective ids change: the real and saved
// ones stay root's, so den-init can take its own back, and no process of
// the user may signal or trace the thread meanwhile. A thread that cannot
// take root's back is never reused: it ends with its goroutine.

type actingKey struct{}

// WithActing returns ctx saying its call is done as acct (see Acting).
func WithActing(ctx context.Context, acct Account) context.Context {
	return context.WithValue(ctx, actingKey{}, acct)
}

// Acting is the user, other than root, whom a call with ctx is done as.
func Acting(ctx context.Context) (Account, bool) {
	acct, ok := ctx.Value(actingKey{}).(Account)
	return acct, ok
}

// AsRoot calls fn with den-init's own credentials, also from a call done
// as a user: fn runs in a goroutine of its own, which never runs on a
// locked thread (RunAs's), and Go starts new threads from one that is not
// locked, so every other thread is root's.
func AsRoot(fn func() error) error {
	done := make(chan error, 1)
	go func() { done <- fn() }()
	return <-done
}

// RunAs calls fn on an OS thread of its own holding acct's effective
// uid, gid and groups, and returns what fn returns; a panic in fn goes on
// in the caller.
func RunAs(acct Account, fn func() error) error {
	type result struct {
		err      error
		panicked any
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		saved, err := syscall.Getgroups() // this thread's, as set*id below
		if err != nil {
			done <- result{err: fmt.Errorf("reading den-init's groups: %w", err)}
			return // the thread ends with the goroutine
		}
		if err := takeIDs(acct.UID, acct.GID, acct.Groups); err != nil {
			done <- result{err: fmt.Errorf("taking the credentials of uid %d: %w", acct.UID, err)}
			return
		}
		var res result
		defer func() {
			if p := recover(); p != nil {
				res.panicked = p
			}
			if takeIDs(0, 0, toUint32s(saved)) == nil {
				runtime.UnlockOSThread()
			}
			done <- res
		}()
		res.err = fn()
	}()
	res := <-done
	if res.panicked != nil {
		panic(res.panicked)
	}
	return res.err
}

// takeIDs sets the calling thread's supplementary groups and effective
// gid and uid, in the order that keeps the privilege to set the next.
// Going back to root, uid 0 comes first, which gives back the
// capabilities the groups need.
func takeIDs(uid, gid uint32, groups []uint32) error {
	keep := ^uintptr(0) // -1: leave this id as it is
	if uid == 0 {
		if err := rawSetres(syscall.SYS_SETRESUID, keep, 0, keep); err != nil {
			return fmt.Errorf("setresuid: %w", err)
		}
	}
	if err := setThreadGroups(groups); err != nil {
		return fmt.Errorf("setgroups: %w", err)
	}
	if err := rawSetres(syscall.SYS_SETRESGID, keep, uintptr(gid), keep); err != nil {
		return fmt.Errorf("setresgid: %w", err)
	}
	if uid != 0 {
		if err := rawSetres(syscall.SYS_SETRESUID, keep, uintptr(uid), keep); err != nil {
			return fmt.Errorf("setresuid: %w", err)
		}
	}
	return nil
}

func rawSetres(trap, r, e, s uintptr) error {
	if _, _, errno := syscall.RawSyscall(trap, r, e, s); errno != 0 {
		return errno
	}
	return nil
}

func setThreadGroups(groups []uint32) error {
	var p unsafe.Pointer
	if len(groups) > 0 {
		p = unsafe.Pointer(&groups[0])
	}
	if _, _, errno := syscall.RawSyscall(syscall.SYS_SETGROUPS, uintptr(len(groups)), uintptr(p), 0); errno != 0 {
		return errno
	}
	return nil
}

func toUint32s(ids []int) []uint32 {
	out := make([]uint32, len(ids))
	for i, id := range ids {
		out[i] = uint32(id)
	}
	return out
}
