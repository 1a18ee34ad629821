package cluster

import (
	"context"
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/den-dev/den/internal/errdefs"
)

// Dial opens a stream of protocol proto to node: a request of path on
// den's API there, as root of the fleet, that the node answers by
// switching to proto (101 Switching Protocols) on the same connection.
// header is sent with the request. An answer other than the switch comes
// back as the node's error.
func (f *Forwarder) Dial(ctx context.Context, node, path, proto string, header http.Header) (net.Conn, error) {
	req, err := f.asRoot(ctx, node, http.MethodGet, path, nil)
	if err != nil {
		return nil, err
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", proto)
	resp, err := f.send(node, req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		return nil, answerErr(node, resp)
	}
	rwc, ok := resp.Body.(io.ReadWriteCloser)
	if !ok || !strings.EqualFold(resp.Header.Get("Upgrade"), proto) {
		resp.Body.Close()
		return nil, errdefs.Unavailable("node %s switched to %q, not %s", node, resp.Header.Get("Upgrade"), proto)
	}
	return &streamConn{ReadWriteCloser: rwc, local: nodeAddr(f.self), remote: nodeAddr(node)}, nil
}

// streamConn is a stream Dial opened, as a net.Conn: what protocols
// spoken over it (SSH) expect. It has no deadlines: contexts and closing
// end it.
type streamConn struct {
	io.ReadWriteCloser
	local, remote net.Addr
}

func (c *streamConn) LocalAddr() net.Addr              { return c.local }
func (c *streamConn) RemoteAddr() net.Addr             { return c.remote }
func (c *streamConn) SetDeadline(time.Time) error      { return nil }
func (c *streamConn) SetReadDeadline(time.Time) error  { return nil }
func (c *streamConn) SetWriteDeadline(time.Time) error { return nil }

// nodeAddr is a node's name as a net.Addr.
type nodeAddr string

func (a nodeAddr) Network() string { return "den-node" }
func (a nodeAddr) String() string  { return string(a) }

// DialGate opens a connection to the SSH gateway of node for a login
// this node checked: of key (SSH wire format) to sandbox id, made from
// remote. It is the request the node's API switches to SSH.
func (f *Forwarder) DialGate(ctx context.Context, node, id string, key []byte, remote string) (net.Conn, error) {
	h := http.Header{}
	h.Set(HeaderSSHKey, base64.StdEncoding.EncodeToString(key))
	h.Set(HeaderSSHRemote, remote)
	return f.Dial(ctx, node, "/v1/sandboxes/"+url.PathEscape(id)+"/ssh", SSHProto, h)
}
