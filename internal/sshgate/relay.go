package sshgate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
)

// In a fleet a login reaches a sandbox on any node. The node the client
// connected to checks the key and the sandbox, as for its own; when the
// sandbox runs on another node it opens an SSH connection to that node's
// gateway, through den's peer API with the fleet's key (Relay), and
// passes every channel, its data and its requests through unchanged.
// The other node checks the same key against the same sandbox again (a
// key revoked meanwhile lets nobody in), and serves the login as its own:
// it wakes the sandbox, holds it in use, and audits what is done.

// relay serves the channels of login l, whose sandbox another node runs,
// through that node's gateway, until either side ends.
func (g *Gate) relay(ctx context.Context, l *login, sc *ssh.ServerConn, chans <-chan ssh.NewChannel, reqs <-chan *ssh.Request) {
	go refuseGlobal(reqs)
	node := l.sandbox.Node
	up, err := g.dialRelay(ctx, l)
	if err != nil {
		g.log.Warn("ssh: reaching the node the sandbox is on", "sandbox", l.sandbox.Name, "node", node, "err", err)
		why := strings.TrimSuffix(message(fmt.Errorf("reaching node %s, which runs sandbox %q: %w", node, l.sandbox.Name, err)), "\n")
		for nch := range chans {
			_ = nch.Reject(ssh.ConnectionFailed, why)
		}
		return
	}
	defer up.Close()
	g.log.Info("ssh: login relayed", "sandbox", l.sandbox.Name, "node", node, "token", l.principal.TokenID, "key", l.key, "remote", l.remote)
	go func() {
		_ = up.Wait()
		sc.Close() // the other node ended it: so does this side
	}()
	var wg sync.WaitGroup
	defer wg.Wait()
	for nch := range chans {
		wg.Go(func() { relayChannel(up, nch) })
	}
}

// dialRelay opens the SSH connection to the gateway of the node l's
// sandbox runs on. That node's host key is not checked: the connection
// goes through den's peer API, which the fleet's key authenticates.
func (g *Gate) dialRelay(ctx context.Context, l *login) (*ssh.Client, error) {
	nc, err := g.cfg.Relay.DialGate(ctx, l.sandbox.Node, l.sandbox.ID, l.pub.Marshal(), l.remote)
	if err != nil {
		return nil, err
	}
	stop := time.AfterFunc(handshakeTimeout, func() { nc.Close() })
	defer stop.Stop()
	cc, chans, reqs, err := ssh.NewClientConn(nc, l.sandbox.Node, &ssh.ClientConfig{
		User:            l.sandbox.ID,
		HostKeyCallback: ssh.InsecureIgnoreHostKey(), // see above
		Config:          ssh.Config{Ciphers: ciphers, KeyExchanges: kex},
	})
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("SSH handshake with node %s: %w", l.sandbox.Node, err)
	}
	return ssh.NewClient(cc, chans, reqs), nil
}

// relayChannel opens nch's channel on up and passes everything between
// the two until both ends closed it. A command's exit status is passed
// on only once its output was, as the client expects it.
func relayChannel(up *ssh.Client, nch ssh.NewChannel) {
	far, farReqs, err := up.OpenChannel(nch.ChannelType(), nch.ExtraData())
	if err != nil {
		var oe *ssh.OpenChannelError
		if errors.As(err, &oe) {
			_ = nch.Reject(oe.Reason, oe.Message)
		} else {
			_ = nch.Reject(ssh.ConnectionFailed, err.Error())
		}
		return
	}
	defer far.Close()
	near, nearReqs, err := nch.Accept()
	if err != nil {
		return
	}
	defer near.Close()
	go func() {
		for r := range nearReqs {
			ok, err := far.SendRequest(r.Type, r.WantReply, r.Payload)
			if r.WantReply {
				_ = r.Reply(ok && err == nil, nil)
			}
		}
		far.Close() // the client closed its end
	}()
	go func() {
		_, _ = io.Copy(far, near)
		_ = far.CloseWrite()
	}()
	var output sync.WaitGroup
	output.Go(func() { _, _ = io.Copy(near, far) })
	output.Go(func() { _, _ = io.Copy(near.Stderr(), far.Stderr()) })
	for r := range farReqs {
		if r.Type == "exit-status" || r.Type == "exit-signal" {
			output.Wait()
		}
		ok, err := near.SendRequest(r.Type, r.WantReply, r.Payload)
		if r.WantReply {
			_ = r.Reply(ok && err == nil, nil)
		}
	}
	output.Wait()
	_ = near.CloseWrite()
}

// ServeRelayed serves nc, a connection another node of the fleet opened
// for the login of key (SSH wire format) to sandbox ref, made from
// remote: that node checked the client holds the key. The login is
// checked again here, and served as one made to this node, but never
// relayed on.
func (g *Gate) ServeRelayed(ctx context.Context, nc net.Conn, key []byte, ref, remote string) {
	pub, err := ssh.ParsePublicKey(key)
	if err != nil {
		g.log.Warn("ssh: a relayed login without a valid key", "from", nc.RemoteAddr().String(), "err", err)
		nc.Close()
		return
	}
	logins := &loginCache{}
	cfg := g.withHostKey(&ssh.ServerConfig{
		Config:        ssh.Config{Ciphers: ciphers, KeyExchanges: kex},
		ServerVersion: "SSH-2.0-den",
		NoClientAuth:  true,
		NoClientAuthCallback: func(ssh.ConnMetadata) (*ssh.Permissions, error) {
			return logins.authorized(g.authorize(ctx, ref, remote, pub))
		},
	})
	g.serveWith(ctx, nc, cfg, logins, false)
}
