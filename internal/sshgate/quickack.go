package sshgate

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// OpenSSH's client leaves Nagle's algorithm on until it has a terminal,
// and during the handshake it writes some messages in two pieces: the
// second waits for the ACK of the first, which Linux delays by up to
// 40 ms. Twice per login, that made `ssh SANDBOX true` five times slower
// than den exec. quickAckConn asks the kernel to acknowledge at once,
// before every read (the kernel drops back to delayed ACKs by itself).
type quickAckConn struct {
	*net.TCPConn
	raw syscall.RawConn
}

// quickAck wraps a TCP connection; anything else is returned as it is.
func quickAck(c net.Conn) net.Conn {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return c
	}
	return &quickAckConn{TCPConn: tc, raw: raw}
}

func (c *quickAckConn) Read(b []byte) (int, error) {
	_ = c.raw.Control(func(fd uintptr) {
		_ = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_QUICKACK, 1)
	})
	return c.TCPConn.Read(b)
}
