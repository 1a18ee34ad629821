// Package sshgate is dend's SSH door: `ssh SANDBOX@HOST` reaches a sandbox
// through den's own verbs, with no sshd inside it.
//
// The user name is the sandbox (name or id); the public key is a key
// registered with `den ssh-key add`, which acts with the rights of the
// token that registered it. What a connection may ask for:
//
//	shell, exec        a command through the sandbox service's exec path,
//	                   with a PTY when the client asks for one; its exit
//	                   status (or signal) goes back to the client
//	subsystem sftp     SFTP served from the sandbox's file API (scp in
//	                   OpenSSH 9 speaks SFTP too)
//	direct-tcpip       `ssh -L`: a TCP connection to a port inside the
//	                   sandbox, exposed or not
//
// Agent and X11 forwarding, remote forwarding (-R) and every other request
// are refused. An unknown sandbox, an unknown key, a key whose token was
// revoked and a sandbox of another owner all get the same refusal, and a
// key is only looked up once the client proved it holds its private half,
// so probing with someone's public key learns nothing.
//
// A connection wakes a sleeping sandbox and keeps it in use for the idle
// policy for as long as it is open. Every login, command, SFTP change and
// forward is in the audit log, under the key's token.
package sshgate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/den-dev/den/internal/audit"
	"github.com/den-dev/den/internal/auth"
	"github.com/den-dev/den/internal/runlogs"
	"github.com/den-dev/den/internal/sandbox"
)

// Sandboxes is what the gateway needs of the sandbox service.
type Sandboxes interface {
	Get(ctx context.Context, ref string) (*sandbox.Sandbox, error)
	GetOwned(ctx context.Context, owner, ref string) (*sandbox.Sandbox, error)
	Resume(ctx context.Context, ref string) (*sandbox.Sandbox, error)
	Hold(ctx context.Context, ref string) func()

	Exec(ctx context.Context, ref string, p sandbox.ExecParams) (*sandbox.Run, error)

	Files(ctx context.Context, ref string) (sandbox.Files, error)
}

// Runs reaches a command's run once it started (*running.Service): its
// final record, its input, its terminal's size and signals.
type Runs interface {
	Run(ctx context.Context, ref, runID string) (*sandbox.Run, error)
	Stdin(ctx context.Context, ref, runID string, r io.Reader, keepOpen bool) error
	Resize(ctx context.Context, ref, runID string, rows, cols uint16) error
	Signal(ctx context.Context, ref, runID, sig string) error
}

// Ports reaches ports inside a sandbox, for `ssh -L` (*exposing.Ports).
type Ports interface {
	DialPort(ctx context.Context, ref string, port uint16) (io.ReadWriteCloser, error)
}

// Logs writes runs' output (internal/runlogs).
type Logs interface {
	Logs(ctx context.Context, ref, runID, stream string, from int64, how runlogs.Follow, w io.Writer) error
}

// Keys finds the principal a public key acts for.
type Keys interface {
	KeyPrincipal(ctx context.Context, key ssh.PublicKey) (auth.Principal, error)
}

// Relay reaches, in a fleet, the node a sandbox runs on.
type Relay interface {
	// Self is this node's name.
	Self() string
	// DialGate opens a connection to node's gateway, for the login of
	// key (in SSH wire format) to the sandbox id, made from remote: a
	// connection that node serves as RelayedLogin would.
	DialGate(ctx context.Context, node, id string, key []byte, remote string) (net.Conn, error)
}

// Config is what a Gate needs. Every field but Relay, Limits and Logger
// is required; with no Relay, only this node's sandboxes are reached, and
// the limits left zero are DefaultLimits'.
type Config struct {
	HostKey   ssh.Signer
	Sandboxes Sandboxes
	Runs      Runs
	Ports     Ports
	Logs      Logs
	Keys      Keys
	Audit     audit.Log
	Relay     Relay
	Limits    Limits
	Logger    *slog.Logger
}

// Gate serves SSH connections.
type Gate struct {
	cfg Config
	log *slog.Logger
	// perKey counts the connections open per key.
	perKey *keyConns

	// audits are the audit entries being written.
	audits sync.WaitGroup

	// mu guards conns, the connections open, closed by Close.
	mu     sync.Mutex
	conns  map[*ssh.ServerConn]struct{}
	closed bool
}

// New returns a Gate. It serves nothing until Serve.
func New(cfg Config) (*Gate, error) {
	if cfg.HostKey == nil || cfg.Sandboxes == nil || cfg.Runs == nil || cfg.Logs == nil || cfg.Keys == nil || cfg.Audit == nil {
		return nil, errors.New("sshgate: a host key, the sandbox service, the key lookup and the audit log are all required")
	}
	cfg.Limits = cfg.Limits.withDefaults()
	if err := cfg.Limits.Validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Gate{cfg: cfg, log: log, conns: map[*ssh.ServerConn]struct{}{},
		perKey: &keyConns{max: cfg.Limits.ConnsPerKey, n: map[string]int{}}}, nil
}

// Limits of a connection.
const (
	// handshakeTimeout bounds key exchange and authentication.
	handshakeTimeout = 30 * time.Second
	// maxAuthTries is how many keys a client may offer.
	maxAuthTries = 6
)

// Serve accepts connections on l until ctx ends or l fails, then closes
// the connections open.
func (g *Gate) Serve(ctx context.Context, l net.Listener) error {
	stop := context.AfterFunc(ctx, func() { l.Close() })
	defer stop()
	defer g.audits.Wait()
	defer g.closeAll()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		nc, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return fmt.Errorf("accepting SSH connections: %w", err)
		}
		wg.Go(func() { g.serveConn(ctx, nc) })
	}
}

func (g *Gate) closeAll() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = true
	for c := range g.conns {
		c.Close()
	}
}

// track registers c until the returned func is called; false when the
// gate is closing.
func (g *Gate) track(c *ssh.ServerConn) (func(), bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil, false
	}
	g.conns[c] = struct{}{}
	return func() {
		g.mu.Lock()
		delete(g.conns, c)
		g.mu.Unlock()
	}, true
}

// Extensions of the permissions a login carries from authentication to
// the connection.
const (
	extSandboxID   = "den-sandbox-id"
	extSandboxName = "den-sandbox-name"
	extFingerprint = "den-key"
)

// login is one authenticated connection: who, and which sandbox.
type login struct {
	principal auth.Principal
	sandbox   *sandbox.Sandbox
	pub       ssh.PublicKey
	key       string // the key's fingerprint
	remote    string
}

func (g *Gate) serverConfig(ctx context.Context, logins *loginCache) *ssh.ServerConfig {
	return g.withHostKey(&ssh.ServerConfig{
		Config:        ssh.Config{Ciphers: ciphers, KeyExchanges: kex},
		MaxAuthTries:  maxAuthTries,
		ServerVersion: "SSH-2.0-den",
		// Any key may be offered: the answer to an offer says nothing
		// about the key. It is looked up once the client signed with
		// it, below.
		PublicKeyCallback: func(ssh.ConnMetadata, ssh.PublicKey) (*ssh.Permissions, error) {
			return &ssh.Permissions{}, nil
		},
		VerifiedPublicKeyCallback: func(meta ssh.ConnMetadata, key ssh.PublicKey, _ *ssh.Permissions, _ string) (*ssh.Permissions, error) {
			l, err := g.authorize(ctx, meta.User(), meta.RemoteAddr().String(), key)
			if err == nil && !logins.counted(g.perKey, l.key) {
				max := g.cfg.Limits.ConnsPerKey
				g.log.Info("ssh: login refused: too many connections with this key", "key", l.key, "user", meta.User(),
					"remote", l.remote, "token", l.principal.TokenID, "max", max)
				g.recordFor(ctx, l, "login", l.remote+" key "+l.key, refusal(fmt.Sprintf("the key has %d connections open, the most allowed", max)))
				return nil, tooManyConns(max)
			}
			return logins.authorized(l, err)
		},
	})
}

func (g *Gate) withHostKey(cfg *ssh.ServerConfig) *ssh.ServerConfig {
	cfg.AddHostKey(g.cfg.HostKey)
	return cfg
}

// kex are the key exchanges offered: not curve25519-sha256, which
// OpenSSH's client prefers and computes with its own portable code, at
// about 1.5 ms more per login than ECDH on P-256, which it leaves to
// OpenSSL. Clients that have ML-KEM (OpenSSH 9.9 on) get that first, for
// its resistance to quantum computers.
var kex = []string{ssh.KeyExchangeMLKEM768X25519, ssh.KeyExchangeECDHP256, ssh.KeyExchangeECDHP384, ssh.KeyExchangeECDHP521,
	ssh.KeyExchangeDH14SHA256}

// ciphers are x/crypto's, without chacha20-poly1305: OpenSSH's client
// prefers it, and in Go it runs at a fraction of AES-GCM's speed, which
// the CPU does in hardware. Files copied with scp go about twice as fast.
var ciphers = []string{ssh.CipherAES128GCM, ssh.CipherAES256GCM, ssh.CipherAES128CTR, ssh.CipherAES192CTR, ssh.CipherAES256CTR}

// errRefused is the one answer to a login that is not let in.
var errRefused = errors.New("permission denied")

// authorize finds the sandbox the user names among those the key's token
// reaches. Every refusal is errRefused; why is logged, and audited when
// the key is known.
func (g *Gate) authorize(ctx context.Context, ref, remote string, key ssh.PublicKey) (*login, error) {
	fp := auth.Fingerprint(key)
	p, err := g.cfg.Keys.KeyPrincipal(ctx, key)
	if err != nil {
		if !errors.Is(err, auth.ErrUnauthorized) {
			g.log.Error("ssh: looking up a key", "key", fp, "remote", remote, "err", err)
		} else {
			g.log.Info("ssh: login refused: key not accepted", "key", fp, "user", ref, "remote", remote)
		}
		return nil, errRefused
	}
	refuse := func(why string, err error) (*login, error) {
		g.log.Info("ssh: login refused", "why", why, "key", fp, "user", ref, "remote", remote, "token", p.TokenID, "err", err)
		g.record(ctx, p, nil, ref, "login", remote+" key "+fp, refusal(why))
		return nil, errRefused
	}
	if p.Scope.ReadOnly() {
		return refuse("read-only token", nil)
	}
	var sb *sandbox.Sandbox
	if p.Scope.Admin() {
		sb, err = g.cfg.Sandboxes.Get(ctx, ref)
	} else if p.Owner != "" {
		sb, err = g.cfg.Sandboxes.GetOwned(ctx, p.Owner, ref)
	} else {
		err = sandbox.NotFound(ref)
	}
	if err == nil && sb.State == sandbox.StateDestroyed {
		err = sandbox.NotFound(ref)
	}
	if err != nil {
		return refuse("no such sandbox for this key", err)
	}
	return &login{principal: p, sandbox: sb, pub: key, key: fp, remote: remote}, nil
}

// loginCache hands a login from authentication to the connection it is
// for. A connection may authenticate more than one key before one
// succeeds; the last success is the one the handshake reports.
type loginCache struct {
	mu   sync.Mutex
	last *login
	// keys counts the connection as one of key's, once; uncount gives
	// it back.
	keys *keyConns
	key  string
}

// counted counts the connection as one of key's, unless it is already;
// false when key has as many open as it may.
func (c *loginCache) counted(keys *keyConns, key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.keys != nil && c.key == key {
		return true
	}
	if !keys.take(key) {
		return false
	}
	if c.keys != nil {
		c.keys.give(c.key)
	}
	c.keys, c.key = keys, key
	return true
}

// uncount gives back the connection counted, when it ends.
func (c *loginCache) uncount() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.keys != nil {
		c.keys.give(c.key)
		c.keys = nil
	}
}

func (c *loginCache) put(l *login) {
	c.mu.Lock()
	c.last = l
	c.mu.Unlock()
}

// authorized keeps l, the login authorize let in, and returns the
// permissions that name it; err is authorize's refusal.
func (c *loginCache) authorized(l *login, err error) (*ssh.Permissions, error) {
	if err != nil {
		return nil, err
	}
	c.put(l)
	return &ssh.Permissions{Extensions: map[string]string{
		extSandboxID: l.sandbox.ID, extSandboxName: l.sandbox.Name, extFingerprint: l.key,
	}}, nil
}

func (c *loginCache) get(perms *ssh.Permissions) *login {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last == nil || perms == nil || c.last.sandbox.ID != perms.Extensions[extSandboxID] || c.last.key != perms.Extensions[extFingerprint] {
		return nil
	}
	return c.last
}

// serveConn runs one connection from handshake to close.
func (g *Gate) serveConn(ctx context.Context, nc net.Conn) {
	logins := &loginCache{}
	defer logins.uncount()
	g.serveWith(ctx, quickAck(nc), g.serverConfig(ctx, logins), logins, true)
}

// serveWith runs connection nc, whose logins cfg lets into logins, from
// handshake to close. mayRelay says a login to a sandbox another node
// runs is relayed there; else it is served here, where the sandbox
// service refuses what it cannot do.
func (g *Gate) serveWith(ctx context.Context, nc net.Conn, cfg *ssh.ServerConfig, logins *loginCache, mayRelay bool) {
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(handshakeTimeout))
	sc, chans, reqs, err := ssh.NewServerConn(nc, cfg)
	if err != nil {
		g.log.Debug("ssh: handshake failed", "remote", nc.RemoteAddr().String(), "err", err)
		return
	}
	_ = nc.SetDeadline(time.Time{})
	defer sc.Close()
	l := logins.get(sc.Permissions)
	if l == nil {
		g.log.Error("ssh: a connection authenticated without its login")
		return
	}
	untrack, ok := g.track(sc)
	if !ok {
		return
	}
	defer untrack()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if r := g.cfg.Relay; mayRelay && r != nil && l.sandbox.Node != "" && l.sandbox.Node != r.Self() {
		g.relay(ctx, l, sc, chans, reqs)
		return
	}
	id := l.sandbox.ID
	g.recordFor(ctx, l, "login", l.remote+" key "+l.key, nil)
	g.log.Info("ssh: login", "sandbox", l.sandbox.Name, "token", l.principal.TokenID, "key", l.key, "remote", l.remote)
	// The connection keeps the sandbox in use; a sleeping one starts
	// waking now, while the client asks for its session.
	release := g.cfg.Sandboxes.Hold(ctx, id)
	defer release()
	if st := l.sandbox.State; st == sandbox.StatePaused || st == sandbox.StateHibernated {
		go func() {
			if _, err := g.cfg.Sandboxes.Resume(ctx, id); err != nil && ctx.Err() == nil {
				g.log.Debug("ssh: waking the sandbox on connect", "sandbox", l.sandbox.Name, "err", err)
			}
		}()
	}

	go refuseGlobal(reqs)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	open := &channelCount{max: g.cfg.Limits.ChannelsPerConn}
	budget := newSFTPBudget(g.cfg.Limits)
	for nch := range chans {
		var serve func()
		switch nch.ChannelType() {
		case "session":
			serve = func() { g.serveSession(ctx, l, nch, budget) }
		case "direct-tcpip":
			serve = func() { g.forward(ctx, l, nch) }
		default:
			_ = nch.Reject(ssh.UnknownChannelType, "den serves sessions and local forwarding (-L) only")
			continue
		}
		if !open.take() {
			g.log.Info("ssh: channel refused: too many open", "sandbox", l.sandbox.Name, "key", l.key, "max", open.max)
			open.reject(nch)
			continue
		}
		wg.Go(func() {
			defer open.give()
			serve()
		})
	}
}

// refuseGlobal refuses every global request: remote forwarding (-R)
// among them. Keepalives get their answer, which is a refusal too.
func refuseGlobal(reqs <-chan *ssh.Request) {
	for r := range reqs {
		if r.WantReply {
			_ = r.Reply(false, nil)
		}
	}
}

// Audit entries: Method is "SSH", Route says what was done ("ssh login",
// "ssh exec", ...), Path what it was done to.
const (
	auditMethod  = "SSH"
	auditTimeout = 10 * time.Second
	maxAuditPath = 512
)

// record writes an audit entry for p about sb (nil when the sandbox was
// not found: ref names it then); err is what it ended with. The entry is
// written beside what it records, not before it: a login or a command
// waits for no disk.
func (g *Gate) record(ctx context.Context, p auth.Principal, sb *sandbox.Sandbox, ref, what, detail string, err error) {
	if len(detail) > maxAuditPath {
		detail = detail[:maxAuditPath]
	}
	e := &audit.Entry{
		Time: time.Now(), TokenID: p.TokenID, TokenName: p.Name, Method: auditMethod, Route: "ssh " + what,
		Path: detail, Sandbox: ref, Status: statusOf(err),
	}
	if err != nil {
		e.Error = err.Error()
	}
	if sb != nil {
		e.SandboxID, e.Sandbox = sb.ID, sb.Name
	}
	ctx = context.WithoutCancel(ctx)
	g.audits.Go(func() {
		ctx, cancel := context.WithTimeout(ctx, auditTimeout)
		defer cancel()
		if err := g.cfg.Audit.RecordAudit(ctx, e); err != nil {
			g.log.Error("ssh: recording in the audit log", "what", what, "who", p.String(), "err", err)
		}
	})
}

// recordFor is record for what a login did.
func (g *Gate) recordFor(ctx context.Context, l *login, what, detail string, err error) {
	g.record(ctx, l.principal, l.sandbox, "", what, detail, err)
}
