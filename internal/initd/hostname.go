package initd

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/den-dev/den/internal/errdefs"
)

// A sandbox's host name can only be changed with CAP_SYS_ADMIN, which no
// process in it holds, den-init included. An instance booted ahead of
// demand for a warm pool learns its name only when a sandbox claims it,
// so the host starts one helper in it beforehand (runsc exec of den-init
// in HostnameHelperArg mode, with that capability alone added): the
// helper connects to den-init's hostname socket and waits. The claim
// hands it the name; it sets it, answers and exits, leaving nothing. The
// socket is abstract (no file in the sandbox's filesystem), accepts one
// connection, and closes at the first rekey or claim, before any
// process of the sandbox's own can run.

// HostnameSocket is the abstract unix socket den-init's helper dials.
const HostnameSocket = "@den-init-hostname"

// hostnameHelper is den-init's end of the helper's connection.
type hostnameHelper struct {
	ln *net.UnixListener

	mu     sync.Mutex
	conn   *net.UnixConn // the helper, once it connected
	pid    int           // the helper's process, once it connected
	closed bool
	ready  chan struct{} // closed once conn is set
}

// listenHostname opens the helper's socket at name and accepts one
// connection in the background.
func listenHostname(name string) (*hostnameHelper, error) {
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: name, Net: "unix"})
	if err != nil {
		return nil, err
	}
	h := &hostnameHelper{ln: ln, ready: make(chan struct{})}
	go func() {
		conn, err := ln.AcceptUnix()
		ln.Close()
		if err != nil {
			return
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.closed {
			conn.Close()
			return
		}
		h.conn, h.pid = conn, peerPID(conn)
		close(h.ready)
	}()
	return h, nil
}

// close stops waiting for a helper and lets go of one that came: it
// exits without changing anything.
func (h *hostnameHelper) close() {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	h.closed = true
	h.ln.Close()
	if h.conn != nil {
		h.conn.Close()
	}
}

// set has the helper name the sandbox, and waits until it has exited.
// NotFound when no helper came by the time ctx ends.
func (h *hostnameHelper) set(ctx context.Context, name string) (named, gone time.Duration, err error) {
	if err := h.await(ctx); err != nil {
		return 0, 0, err
	}
	t0 := time.Now()
	h.mu.Lock()
	conn, pid := h.conn, h.pid
	h.mu.Unlock()
	if conn == nil {
		return 0, 0, errdefs.NotFound("no host name helper in this instance")
	}
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	if _, err := fmt.Fprintf(conn, "%s\n", name); err != nil {
		return 0, 0, fmt.Errorf("telling the host name helper: %w", err)
	}
	reply, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return 0, 0, fmt.Errorf("hearing from the host name helper: %w", err)
	}
	if reply = strings.TrimSpace(reply); reply != "ok" {
		return 0, 0, errors.New("host name helper: " + reply)
	}
	h.close()
	t1 := time.Now()
	// It exits right after answering: wait for it to be gone, so the
	// sandbox's first look finds only what a fresh boot has.
	// (A helper in den-init's own process, as in tests, is not waited for.)
	for end := time.Now().Add(time.Second); pid > 0 && pid != os.Getpid() && time.Now().Before(end); {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err != nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	return t1.Sub(t0), time.Since(t1), nil
}

// await waits a little for the helper to connect; NotFound when none
// does.
func (h *hostnameHelper) await(ctx context.Context) error {
	if h == nil {
		return errdefs.NotFound("no host name helper in this instance")
	}
	wait, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	select {
	case <-h.ready:
		return nil
	case <-wait.Done():
		return errdefs.NotFound("no host name helper in this instance")
	}
}

// helperPID is the helper's process id, or 0.
func (h *hostnameHelper) helperPID() int {
	if h == nil {
		return 0
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.pid
}

// peerPID is the process at the other end of conn, or 0.
func peerPID(conn *net.UnixConn) int {
	pid := 0
	if raw, err := conn.SyscallConn(); err == nil {
		raw.Control(func(fd uintptr) {
			if cred, err := unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED); err == nil {
				pid = int(cred.Pid)
			}
		})
	}
	return pid
}

// HostnameHelperMain is den-init in HostnameHelperArg mode: it waits on
// den-init's hostname socket for a name, sets it and answers. It returns
// the process's exit code.
func HostnameHelperMain() int {
	return hostnameHelperMain(HostnameSocket, func(name string) error { return unix.Sethostname([]byte(name)) })
}

func hostnameHelperMain(socket string, sethostname func(string) error) int {
	conn, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: socket, Net: "unix"})
	if err != nil {
		fmt.Fprintf(os.Stderr, "den-init: host name helper: %v\n", err)
		return 1
	}
	defer conn.Close()
	name, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return 0 // den-init let go: nothing to do
	}
	name = strings.TrimSpace(name)
	if err := sethostname(name); err != nil {
		fmt.Fprintf(conn, "setting the host name: %v\n", err)
		return 1
	}
	fmt.Fprintln(conn, "ok")
	return 0
}
