package httpx

import (
	"context"
	"net/http"

	"github.com/den-dev/den/internal/auth"
	"github.com/den-dev/den/internal/sandbox"
)

// localKey marks a request's context as having come through Local.
type localKey struct{}

// IsLocal reports whether r came through Local: root's, on the unix socket.
func IsLocal(r *http.Request) bool {
	local, _ := r.Context().Value(localKey{}).(bool)
	return local
}

// Local marks every request through h as root's: use it for the unix
// socket, which only root can open. Requests that do not come through it
// must carry a bearer token.
func Local(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), localKey{}, true)))
	})
}

// Info is what the access layers learn of one request: the guard
// and the handlers fill it in, the audit reads it once the call is over.
// Only the request's own goroutine touches it.
type Info struct {
	Principal auth.Principal
	Route     string // the route's pattern; "" when none matched
	SandboxID string // the sandbox the call is about, when found
	Sandbox   string // its name, or the name asked for
	ErrMsg    string // the message of the error answered, if any
	// Grant is, for a request let in without a token (a public port or
	// a signed URL, see internal/httpapi/portproxy), the one port it may
	// reach.
	Grant *PortGrant
	// Found is the sandbox the owner scope resolved, for forwarding
	// without looking it up again.
	Found *sandbox.Sandbox
	// FromNode: another node of the fleet forwarded the request here;
	// SentOn: this node forwarded it to the sandbox's node, which
	// answers and audits it (internal/httpapi/fleetapi).
	FromNode, SentOn bool
}

// PortGrant is what a request let in without a token reaches: one port of
// one sandbox.
type PortGrant struct {
	Ref         string // the sandbox as the request named it
	SandboxID   string
	SandboxName string
	Port        uint16
	SignedQuery bool // let in by a signature in the query (not a cookie)
}

type infoKey struct{}

// WithInfo returns ctx carrying info, for InfoOf.
func WithInfo(ctx context.Context, info *Info) context.Context {
	return context.WithValue(ctx, infoKey{}, info)
}

// InfoOf returns the request's info. A request that did not go through
// authenticate (a test calling a handler directly) gets a fresh one, of
// no principal, which may do nothing.
func InfoOf(r *http.Request) *Info {
	if info, ok := r.Context().Value(infoKey{}).(*Info); ok {
		return info
	}
	return &Info{}
}

// PrincipalOf is the principal r acts for.
func PrincipalOf(r *http.Request) auth.Principal { return InfoOf(r).Principal }

// NoteSandbox records which sandbox a call was about, for the audit.
func NoteSandbox(r *http.Request, id, name string) {
	info := InfoOf(r)
	info.SandboxID, info.Sandbox = id, name
}

// NoteError records the message of the error the call answered with.
func NoteError(r *http.Request, msg string) { InfoOf(r).ErrMsg = msg }
