package httpapi

import (
	"bufio"
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/den-dev/den/internal/cluster"
	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/httpapi/httpx"
)

// SSHRelay serves an SSH login another node of the fleet relays here, for
// a sandbox this node runs (*sshgate.Gate implements it).
type SSHRelay interface {
	ServeRelayed(ctx context.Context, nc net.Conn, key []byte, ref, remote string)
}

// sshRelayRoute is where one node's SSH gateway reaches another's. It is
// never forwarded: a node sends it straight to the sandbox's node.
const sshRelayRoute = "/v1/sandboxes/{name}/ssh"

// relaySSH switches the connection of a node's request to SSH and serves
// it as a login of the key the request carries, which that node checked.
// Any caller outside the fleet gets 404, as for a route that is not.
func (s *server) relaySSH(w http.ResponseWriter, r *http.Request) error {
	if !httpx.InfoOf(r).FromNode {
		return errdefs.WithHint(errdefs.NotFound("no such route for callers outside the fleet"),
			"`ssh SANDBOX@HOST -p PORT` reaches a sandbox through a dend started with --ssh-listen")
	}
	if s.ssh == nil {
		return errdefs.Unavailable("this node has no SSH gateway")
	}
	if !strings.EqualFold(r.Header.Get("Upgrade"), cluster.SSHProto) {
		return errdefs.Invalid("this route switches to %s (Upgrade: %s)", cluster.SSHProto, cluster.SSHProto)
	}
	key, err := base64.StdEncoding.DecodeString(r.Header.Get(cluster.HeaderSSHKey))
	if err != nil || len(key) == 0 {
		return errdefs.Invalid("no SSH key in %s", cluster.HeaderSSHKey)
	}
	nc, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return fmt.Errorf("taking over the connection for SSH: %w", err)
	}
	_ = nc.SetDeadline(time.Time{}) // the server's are for HTTP
	if _, err := fmt.Fprintf(brw, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: %s\r\n\r\n", cluster.SSHProto); err != nil || brw.Flush() != nil {
		nc.Close()
		return nil
	}
	s.ssh.ServeRelayed(r.Context(), &bufferedConn{Conn: nc, r: brw.Reader}, key, r.PathValue("name"), r.Header.Get(cluster.HeaderSSHRemote))
	return nil
}

// bufferedConn reads what the HTTP server had read ahead first.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(b []byte) (int, error) { return c.r.Read(b) }
