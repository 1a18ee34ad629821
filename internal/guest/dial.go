package guest

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// DialUpgrade is the protocol GET /v1/dial upgrades to: the raw bytes of
// a TCP connection to a port on the sandbox's loopback.
const DialUpgrade = "tcp"

// DialPort connects to port on the sandbox's loopback, through den-init,
// so a server that listens on 127.0.0.1 only is reached too. The
// connection half-closes (CloseWrite) as a TCP one does. A den-init from
// before this route answers not found.
func (c *Client) DialPort(ctx context.Context, port uint16) (*PortConn, error) {
	if err := c.abortErr(); err != nil {
		return nil, fmt.Errorf("reaching den-init: %w", err)
	}
	addr := strings.TrimPrefix(c.base, "http://")
	d := net.Dialer{Timeout: dialTimeout, KeepAlive: keepAlive}
	raw, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, c.broken(ctx, "reaching den-init", err)
	}
	conn := c.track(raw)
	fail := func(err error) (*PortConn, error) {
		conn.Close()
		return nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	} else {
		_ = conn.SetDeadline(time.Now().Add(2 * dialTimeout))
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	req, err := http.NewRequest(http.MethodGet, c.base+"/v1/dial?"+url.Values{"port": {strconv.Itoa(int(port))}}.Encode(), nil)
	if err != nil {
		return fail(err)
	}
	req.Header.Set("Authorization", *c.auth.Load())
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", DialUpgrade)
	if err := req.Write(conn); err != nil {
		return fail(c.broken(ctx, "reaching den-init", err))
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		return fail(c.broken(ctx, "reading den-init's answer", err))
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		defer resp.Body.Close()
		return fail(responseError(resp))
	}
	if !stop() {
		return fail(ctx.Err())
	}
	_ = conn.SetDeadline(time.Time{})
	return &PortConn{Conn: conn, r: br, tcp: raw}, nil
}

// PortConn is a connection to a port inside the sandbox.
type PortConn struct {
	net.Conn
	r   *bufio.Reader // what den-init sent after its answer comes first
	tcp net.Conn
}

func (p *PortConn) Read(b []byte) (int, error) { return p.r.Read(b) }

// CloseWrite tells the port's server that no more is coming.
func (p *PortConn) CloseWrite() error {
	if tc, ok := p.tcp.(*net.TCPConn); ok {
		return tc.CloseWrite()
	}
	return p.Close()
}
