package initd

import (
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/guest"
)

// dialTimeout bounds reaching a port inside the sandbox.
const dialTimeout = 10 * time.Second

// handleDial connects the caller to a TCP port on the sandbox's loopback:
// `ssh -L` through den's SSH gateway reaches a server that listens on
// 127.0.0.1 only (a notebook, an editor's server), which the sandbox's
// private address does not. The request upgrades to the raw connection
// (Upgrade: tcp) once the port answered.
func (s *Server) handleDial(w http.ResponseWriter, r *http.Request) error {
	if r.Header.Get("Upgrade") != guest.DialUpgrade {
		return errdefs.Invalid("this route takes Upgrade: %s", guest.DialUpgrade)
	}
	port, err := strconv.ParseUint(r.URL.Query().Get("port"), 10, 16)
	if err != nil || port == 0 {
		return errdefs.Invalid("invalid port %q", r.URL.Query().Get("port"))
	}
	d := net.Dialer{Timeout: dialTimeout}
	target, err := d.DialContext(r.Context(), "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port))))
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) {
			return errdefs.WithHint(errdefs.Unavailable("nothing listens on port %d inside the sandbox", port),
				"start the server first; it may listen on 127.0.0.1 or on every address")
		}
		return errdefs.Unavailable("reaching port %d inside the sandbox: %v", port, err)
	}
	defer target.Close()
	conn, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Time{})
	if _, err := rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + guest.DialUpgrade + "\r\n\r\n"); err != nil {
		return nil
	}
	if err := rw.Flush(); err != nil {
		return nil
	}
	relay(conn, rw.Reader, target)
	return nil
}

// relay copies both ways until both directions ended, passing on a
// half-close when the other end supports it.
func relay(conn net.Conn, fromConn io.Reader, target net.Conn) {
	var wg sync.WaitGroup
	wg.Go(func() {
		_, _ = io.Copy(target, fromConn)
		if tc, ok := target.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		} else {
			target.Close()
		}
	})
	_, _ = io.Copy(conn, target)
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	} else {
		conn.Close()
	}
	wg.Wait()
}
