// Package testproc starts and stops the servers tests and benchmarks run
// beside den (PostgreSQL, MinIO) as children that die with the process.
package testproc

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"time"
)

// Start starts cmd, whose SysProcAttr sets Pdeathsig, and returns a
// channel closed when it exits. Pdeathsig fires when the OS thread that
// started the child ends, not the process: a test that locks a thread to
// enter a network namespace and returns without unlocking it ends that
// thread. So the child is started from a thread of its own, locked and
// kept until the child exits.
func Start(cmd *exec.Cmd) (<-chan struct{}, error) {
	done := make(chan struct{})
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread lives as long as the child
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		cmd.Wait()
		close(done)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return done, nil
}

// Stop sends cmd sig and waits for it to exit (done), killing it after
// grace.
func Stop(cmd *exec.Cmd, done <-chan struct{}, sig os.Signal, grace time.Duration) {
	cmd.Process.Signal(sig)
	select {
	case <-done:
	case <-time.After(grace):
		cmd.Process.Kill()
		<-done
	}
}

// FreePort returns a loopback TCP port nothing listens on now (something
// may take it before the caller binds it).
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
