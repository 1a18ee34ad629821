package sshgate

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"

	"golang.org/x/crypto/ssh"
)

// directTCPIP is the payload of a direct-tcpip channel (RFC 4254, 7.2).
type directTCPIP struct {
	Host       string
	Port       uint32
	OriginHost string
	OriginPort uint32
}

// loopbackNames are the hosts `ssh -L` may name: the sandbox itself. Any
// other host is refused, so forwarding never reaches past the sandbox
// (its network policy decides what the sandbox reaches, not the gateway).
var loopbackNames = map[string]bool{"localhost": true, "127.0.0.1": true, "::1": true, "[::1]": true}

// forward serves `ssh -L LOCAL:localhost:PORT`: a connection to PORT
// inside the sandbox, exposed or not.
func (g *Gate) forward(ctx context.Context, l *login, nch ssh.NewChannel) {
	var d directTCPIP
	if err := ssh.Unmarshal(nch.ExtraData(), &d); err != nil {
		_ = nch.Reject(ssh.ConnectionFailed, "malformed direct-tcpip request")
		return
	}
	host := strings.ToLower(d.Host)
	if !loopbackNames[host] && host != l.sandbox.Name && host != l.sandbox.ID {
		_ = nch.Reject(ssh.Prohibited, fmt.Sprintf("den forwards to ports inside the sandbox only: use localhost:%d", d.Port))
		return
	}
	if d.Port == 0 || d.Port > 0xffff {
		_ = nch.Reject(ssh.ConnectionFailed, fmt.Sprintf("invalid port %d", d.Port))
		return
	}
	port := uint16(d.Port)
	detail := fmt.Sprintf("localhost:%d", port)
	conn, err := g.cfg.Ports.DialPort(ctx, l.sandbox.ID, port)
	g.recordFor(ctx, l, "forward", detail, err)
	if err != nil {
		_ = nch.Reject(ssh.ConnectionFailed, strings.TrimSuffix(message(err), "\n"))
		return
	}
	defer conn.Close()
	ch, reqs, err := nch.Accept()
	if err != nil {
		return
	}
	defer ch.Close()
	go ssh.DiscardRequests(reqs)
	stop := context.AfterFunc(ctx, func() { ch.Close(); conn.Close() })
	defer stop()
	var wg sync.WaitGroup
	wg.Go(func() {
		_, _ = io.Copy(conn, ch)
		if cw, ok := conn.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		} else {
			conn.Close()
		}
	})
	_, _ = io.Copy(ch, conn)
	_ = ch.CloseWrite()
	wg.Wait()
}
