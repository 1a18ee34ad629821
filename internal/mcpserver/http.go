package mcpserver

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/den-dev/den/client"
	"github.com/den-dev/den/internal/inproc"
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
}

// NewHTTP returns the /mcp handler. isLocal tells a request that came in
// on dend's unix socket; self is dend's API, which the tools call.
func NewHTTP(isLocal func(*http.Request) bool, self *inproc.API, opts Options, log *slog.Logger) *HTTP {
	h := &HTTP{isLocal: isLocal}
	rootTransport, tokenTransport := self.RootTransport(), self.TokenTransport()
	hopts := &mcp.StreamableHTTPOptions{SessionTimeout: 30 * time.Minute, Logger: log}

	local := New(func(context.Context, *mcp.CallToolRequest) (*client.Client, error) {
		return inproc.Client(rootTransport, "", "", "den-mcp")
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
			return inproc.Client(tokenTransport, base, strings.TrimSpace(token), "den-mcp")
		}, opts)
	}, hopts)
	return h
}

func (h *HTTP) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.isLocal(r) {
		h.local.ServeHTTP(w, r)
		return
	}
	h.remote.ServeHTTP(w, r)
}
