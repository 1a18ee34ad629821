package mcpserver

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/den-dev/den/client"
	"github.com/den-dev/den/internal/inproc"
)

// HTTPConfig is what the /mcp handler needs.
type HTTPConfig struct {
	// API is dend's API, which the tools call in process.
	API *inproc.API
	// IsLocal tells a request that came in on dend's unix socket.
	IsLocal func(*http.Request) bool
	// Caller names who made a request that did not: the API token it
	// carried. Sessions are counted, and bound, per caller.
	Caller  func(*http.Request) string
	Options Options
	// Limits bound the sessions; a zero field takes its default.
	Limits Limits
	Logger *slog.Logger
}

// HTTP serves MCP's streamable HTTP transport on dend's listeners. Each
// tool call is made as a request to dend's own API, in process, with the
// rights of the HTTP request it came in: the bearer token it carried, or
// root's for dend's unix socket. Sessions begun on the socket and over TCP
// are kept apart, so a session id never carries root's rights elsewhere;
// a token's session serves that token alone.
//
// Each door builds its tools once: a session costs only its own state,
// and the sessions are bounded (Limits).
type HTTP struct {
	isLocal func(*http.Request) bool
	caller  func(*http.Request) string
	local   *sessions // sessions of the unix socket
	remote  *sessions // sessions of token holders
}

// NewHTTP returns the /mcp handler.
func NewHTTP(cfg HTTPConfig) *HTTP {
	h := &HTTP{isLocal: cfg.IsLocal, caller: cfg.Caller}
	cfg.Limits = cfg.Limits.withDefaults()
	rootTransport, tokenTransport := cfg.API.RootTransport(), cfg.API.TokenTransport()
	hopts := &mcp.StreamableHTTPOptions{SessionTimeout: cfg.Limits.IdleTimeout, Logger: cfg.Logger}

	local := New(func(context.Context, *mcp.CallToolRequest) (*client.Client, error) {
		return inproc.Client(rootTransport, "", "", "den-mcp")
	}, cfg.Options)
	h.local = newSessions(local, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return local }, hopts),
		0, cfg.Limits.Total)

	// Each call brings its own token, and the address its client
	// reached dend at, for the links tools hand out.
	remote := New(func(_ context.Context, req *mcp.CallToolRequest) (*client.Client, error) {
		var token, base string
		if req.Extra != nil {
			token, _ = strings.CutPrefix(req.Extra.Header.Get("Authorization"), "Bearer ")
			if req.Extra.TokenInfo != nil {
				base, _ = req.Extra.TokenInfo.Extra[baseKey].(string)
			}
		}
		if token == "" {
			return nil, errors.New("this call carried no bearer token: send `Authorization: Bearer <token>` with every request")
		}
		return inproc.Client(tokenTransport, base, strings.TrimSpace(token), "den-mcp")
	}, cfg.Options)
	// The token was checked before /mcp; the SDK's middleware only
	// carries who holds it (the SDK binds a session to its UserID too)
	// and the address, into every request's TokenInfo.
	carry := auth.RequireBearerToken(func(_ context.Context, _ string, r *http.Request) (*auth.TokenInfo, error) {
		base := "http://" + r.Host
		if r.TLS != nil {
			base = "https://" + r.Host
		}
		return &auth.TokenInfo{UserID: h.caller(r), Extra: map[string]any{baseKey: base}}, nil
	}, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})
	h.remote = newSessions(remote, carry(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return remote }, hopts)),
		cfg.Limits.PerCaller, cfg.Limits.Total)
	return h
}

// baseKey holds, in a request's TokenInfo.Extra, the URL its client
// reached dend at.
const baseKey = "den.base"

func (h *HTTP) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.isLocal(r) {
		h.local.serve(w, r, "root")
		return
	}
	h.remote.serve(w, r, h.caller(r))
}
