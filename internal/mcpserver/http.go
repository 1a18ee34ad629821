package mcpserver

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/den-dev/den/client"
)

// HTTP serves MCP's streamable HTTP transport on dend's listeners. Each
// tool call is made as a request to dend's own API, in process, with the
// rights of the HTTP request it came in: the bearer token it carried, or
// root's for dend's unix socket. Sessions begun on the socket and over TCP
// are kept apart, so a session id never carries root's rights elsewhere.
type HTTP struct {
	isLocal func(*http.Request) bool
	local   http.Handler // sessions of the unix socket
	remote  http.Handler // sessions of token holders
	log     *slog.Logger

	mu              sync.Mutex
	asRoot, asToken *pipeListener // in-process connections to the API
	servers         []*http.Server
}

// NewHTTP returns the /mcp handler. isLocal tells a request that came in
// on dend's unix socket. Call Serve with the API's handlers before the
// first request, and Close when dend stops.
func NewHTTP(isLocal func(*http.Request) bool, opts Options, log *slog.Logger) *HTTP {
	h := &HTTP{isLocal: isLocal, log: log, asRoot: newPipeListener(), asToken: newPipeListener()}
	rootClient := &http.Client{Transport: pipeTransport(h.asRoot)}
	tokenTransport := pipeTransport(h.asToken)
	hopts := &mcp.StreamableHTTPOptions{SessionTimeout: 30 * time.Minute, Logger: log}

	local := New(func(context.Context, *mcp.CallToolRequest) (*client.Client, error) {
		return client.New(client.WithSocket("dend"), client.WithHTTPClient(rootClient), client.WithUserAgent("den-mcp"))
	}, opts)
	h.local = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return local }, hopts)

	// A session's server knows the address its client reached dend at,
	// for the links it hands out; each call brings its own token.
	h.remote = mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		base := "http://" + r.Host
		if r.TLS != nil {
			base = "https://" + r.Host
		}
		return New(func(_ context.Context, req *mcp.CallToolRequest) (*client.Client, error) {
			var token string
			if req.Extra != nil {
				token, _ = strings.CutPrefix(req.Extra.Header.Get("Authorization"), "Bearer ")
			}
			if token == "" {
				return nil, errors.New("this call carried no bearer token: send `Authorization: Bearer <token>` with every request")
			}
			return client.New(client.WithHost(base, strings.TrimSpace(token)),
				client.WithHTTPClient(&http.Client{Transport: tokenTransport}), client.WithUserAgent("den-mcp"))
		}, opts)
	}, hopts)
	return h
}

// Serve starts answering tool calls: asRoot is the API as the unix
// socket serves it, asToken as TCP does.
func (h *HTTP) Serve(asRoot, asToken http.Handler) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, s := range []struct {
		l *pipeListener
		h http.Handler
	}{{h.asRoot, asRoot}, {h.asToken, asToken}} {
		srv := &http.Server{Handler: s.h, ReadHeaderTimeout: 10 * time.Second}
		h.servers = append(h.servers, srv)
		go srv.Serve(s.l)
	}
}

// Close stops the in-process servers; calls under way are cut.
func (h *HTTP) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, srv := range h.servers {
		srv.Close()
	}
	h.asRoot.Close()
	h.asToken.Close()
	return nil
}

func (h *HTTP) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.isLocal(r) {
		h.local.ServeHTTP(w, r)
		return
	}
	h.remote.ServeHTTP(w, r)
}

// pipeListener hands the server side of in-memory connections to an
// http.Server.
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

// dial returns the client side of a new connection.
func (l *pipeListener) dial(ctx context.Context, _, _ string) (net.Conn, error) {
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

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "dend" }

func pipeTransport(l *pipeListener) *http.Transport {
	return &http.Transport{DialContext: l.dial, MaxIdleConnsPerHost: 16, IdleConnTimeout: time.Minute}
}
