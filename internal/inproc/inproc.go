// Package inproc connects dend's front doors (MCP, E2B) to dend's own API
// inside the daemon, over in-memory connections. What a door does is then
// the API call it makes, with the rights of the caller it acts for: checked,
// woken, audited and answered exactly as if the caller had made it.
//
// An API has two ends: one the API answers as it answers its unix socket
// (root), one as it answers TCP (the bearer token decides). The daemon
// builds the API's handler, then calls Serve with it; until then, and
// after Close, connections are refused.
package inproc

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/den-dev/den/client"
)

// API is dend's API, reachable in process.
type API struct {
	asRoot, asToken *listener

	mu      sync.Mutex
	servers []*http.Server
}

// New returns an API whose ends accept connections once Serve is called.
func New() *API {
	return &API{asRoot: newListener(), asToken: newListener()}
}

// Serve starts answering: asRoot is the API as the unix socket serves it,
// asToken as TCP does.
func (a *API) Serve(asRoot, asToken http.Handler) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, s := range []struct {
		l *listener
		h http.Handler
	}{{a.asRoot, asRoot}, {a.asToken, asToken}} {
		srv := &http.Server{Handler: s.h, ReadHeaderTimeout: 10 * time.Second, ConnContext: markInProcess}
		a.servers = append(a.servers, srv)
		go srv.Serve(s.l)
	}
}

// Close stops answering; calls under way are cut.
func (a *API) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, srv := range a.servers {
		srv.Close()
	}
	a.asRoot.Close()
	a.asToken.Close()
	return nil
}

// Headers a door sets on a request through RootTransport to act with
// less than root's rights: for one owner identity, under a name the
// audit log shows. dend honours them only on requests it would answer as
// root's (the unix socket, RootTransport), where they can only lower the
// caller's rights.
const (
	ActAsOwnerHeader = "Den-Act-As-Owner"
	ActAsNameHeader  = "Den-Act-As-Name"
)

// OwnOriginHeader is set by a door that serves a sandbox's port on a
// host of its own (E2B's PORT-ID.DOMAIN): the browser sees the
// application at that origin, not at dend's, so what the port proxy
// keeps away from dend's origin (cookies, service workers) may pass.
// dend honours it only on requests that came in process (FromDoor), or
// that another node of its fleet forwarded (having dropped any a caller
// sent), and never passes it on to the application.
const OwnOriginHeader = "Den-Own-Origin"

// TimeoutFloorHeader is set by a door whose protocol's timeouts are
// lifetimes asked for on purpose (E2B's): the idle policy a request sets
// may go down to this duration, the floor the door's admin chose, instead
// of dend's --min-ttl. dend believes it only from a door in process, or
// from another node of its fleet (which dropped any a caller sent).
const TimeoutFloorHeader = "Den-Timeout-Floor"

// inProcessKey marks the context of a request that came in process.
type inProcessKey struct{}

func markInProcess(ctx context.Context, _ net.Conn) context.Context {
	return context.WithValue(ctx, inProcessKey{}, true)
}

// FromDoor reports whether a request's context is that of one a door in
// dend sent in process, over either end, rather than one from a network
// or the unix socket.
func FromDoor(ctx context.Context) bool {
	v, _ := ctx.Value(inProcessKey{}).(bool)
	return v
}

// RootTransport carries requests the API answers as root's.
func (a *API) RootTransport() *http.Transport { return transport(a.asRoot) }

// TokenTransport carries requests the API answers as their bearer
// token's.
func (a *API) TokenTransport() *http.Transport { return transport(a.asToken) }

// Client returns a Go SDK client of the API over rt (one of the two
// transports), sending token as its bearer token unless it is "". base
// is the address the caller reached dend at (e.g. http://host:7070), so
// the URLs the API hands out point where the caller can follow them.
func Client(rt http.RoundTripper, base, token, userAgent string) (*client.Client, error) {
	hc := &http.Client{Transport: rt}
	if token == "" {
		return client.New(client.WithSocket("dend"), client.WithHTTPClient(hc), client.WithUserAgent(userAgent))
	}
	return client.New(client.WithHost(base, token), client.WithHTTPClient(hc), client.WithUserAgent(userAgent))
}

// listener hands the server side of in-memory connections to an
// http.Server.
type listener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newListener() *listener {
	return &listener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *listener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *listener) Addr() net.Addr { return addr{} }

// dial returns the client side of a new connection.
func (l *listener) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	c, s := net.Pipe()
	select {
	case l.conns <- s:
		return c, nil
	case <-l.done:
	case <-ctx.Done():
	}
	c.Close()
	s.Close()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return nil, errors.New("dend is shutting down")
}

type addr struct{}

func (addr) Network() string { return "pipe" }
func (addr) String() string  { return "dend" }

func transport(l *listener) *http.Transport {
	return &http.Transport{DialContext: l.dial, MaxIdleConnsPerHost: 16, IdleConnTimeout: time.Minute}
}
