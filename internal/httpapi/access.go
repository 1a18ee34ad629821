package httpapi

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/internal/audit"
	"github.com/den-dev/den/internal/auth"
	"github.com/den-dev/den/internal/cluster"
	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/httpapi/httpx"
	"github.com/den-dev/den/internal/httpapi/portproxy"
	"github.com/den-dev/den/internal/idle"
	"github.com/den-dev/den/internal/inproc"
	"github.com/den-dev/den/internal/sandbox"
)

// Who may do what, in the order a request meets it:
//
//  1. authenticate: the principal. Requests that came through Local (the
//     root-only unix socket) are root; any other needs a bearer token the
//     TokenService accepts, or gets 401 — except a request to an exposed
//     port that is public or carries dend's signature, which is let in to
//     that one port alone (internal/httpapi/portproxy).
//  2. auditCalls: once the call is answered, a call that changes (or
//     tries to change) something is recorded with its outcome. Never its
//     body.
//  3. guard, per route: read-only scopes may change nothing (403); images
//     change only for admins, tokens, the audit log and secrets are for
//     admins only (403); and for owner scopes a sandbox another owns is
//     answered exactly as one that does not exist (404), so they cannot
//     even learn it is there.
//
// The handlers then act for the principal: creates and forks by an owner
// token give the new sandboxes its owner identity, and lists show only
// what it may see.

// IsLocal reports whether r came through Local: root's, on the unix socket.
func IsLocal(r *http.Request) bool { return httpx.IsLocal(r) }

// Local marks every request through h as root's: use it for the unix
// socket, which only root can open. Requests that do not come through it
// must carry a bearer token.
func Local(h http.Handler) http.Handler { return httpx.Local(h) }

// Caller names who made r, for what is counted per caller (a door's
// sessions): the id of the API token it carried, or the name of a
// principal that has no token id (root, the token file's admin).
func Caller(r *http.Request) string {
	p := httpx.PrincipalOf(r)
	if p.TokenID != "" {
		return "token " + p.TokenID
	}
	return p.Name
}

// authenticate finds the principal of each request, answering 401 when
// there is none.
func (s *server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		info := &httpx.Info{FromNode: s.fromNode(r)}
		if !info.FromNode && !inproc.FromDoor(r.Context()) {
			// Only a door says a port is served on a host of its own:
			// a caller's claim is dropped here, before a node of the
			// fleet, which believes the node that forwards it, sees it.
			r.Header.Del(inproc.OwnOriginHeader)
			r.Header.Del(inproc.TimeoutFloorHeader)
		}
		// A request another node forwarded from its socket is as local
		// as one on this socket: the fleet's key vouches for it.
		if IsLocal(r) || (info.FromNode && r.Header.Get(cluster.HeaderLocal) != "") {
			info.Principal = localPrincipal(r)
		} else if err := s.identify(r, info); err != nil {
			if errors.Is(err, auth.ErrUnauthorized) {
				w.Header().Set("WWW-Authenticate", `Bearer realm="den"`)
				s.refusals.note(r, err)
			}
			httpx.WriteError(s.log, w, r, err)
			return
		}
		ctx := httpx.WithInfo(r.Context(), info)
		if v := r.Header.Get(inproc.TimeoutFloorHeader); v != "" {
			floor, err := time.ParseDuration(v)
			if err != nil || floor <= 0 {
				httpx.WriteError(s.log, w, r, errdefs.Invalid("bad %s %q: a door sends a positive duration", inproc.TimeoutFloorHeader, v))
				return
			}
			ctx = idle.WithFloor(ctx, floor)
		}
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// localPrincipal is root, or, when a door in dend asks to act for one
// owner identity (inproc.ActAsOwnerHeader), that owner with an owner
// token's rights under the name the door gives.
func localPrincipal(r *http.Request) auth.Principal {
	owner := r.Header.Get(inproc.ActAsOwnerHeader)
	if owner == "" {
		return auth.Root()
	}
	name := r.Header.Get(inproc.ActAsNameHeader)
	if name == "" {
		name = "owner " + owner
	}
	return auth.Principal{Name: name, Scope: auth.ScopeOwner, Owner: owner}
}

// identify finds the principal of a request that did not come through
// Local: one an exposed port lets in without a token, or the bearer
// token's.
func (s *server) identify(r *http.Request, info *httpx.Info) error {
	p, grant, ok, err := s.ports.Principal(r)
	if err != nil {
		return err
	}
	if ok {
		info.Principal, info.Grant = p, grant
		return nil
	}
	info.Principal, err = s.bearerPrincipal(r)
	return err
}

// bearerPrincipal checks the request's bearer token.
func (s *server) bearerPrincipal(r *http.Request) (auth.Principal, error) {
	tok, ok := auth.ParseBearer(r.Header.Get("Authorization"))
	if !ok {
		tok, ok = execSocketToken(r)
	}
	if !ok {
		return auth.Principal{}, errdefs.WithHint(auth.Unauthorized("missing bearer token"),
			"set DEN_TOKEN to an API token (sent as `Authorization: Bearer <token>`); an admin makes one with `den token create`")
	}
	if s.tokens == nil {
		return auth.Principal{}, errdefs.WithHint(auth.Unauthorized("this dend takes no API tokens here"),
			"use dend's unix socket")
	}
	return s.tokens.Authenticate(r.Context(), tok)
}

// execSocketToken returns the token a browser's exec WebSocket offers as
// a subprotocol (api.TokenSubprotocolPrefix), since it cannot set the
// Authorization header. Only the exec route takes it: a WebSocket to an
// exposed port passes its headers on to the sandbox, which must never see
// a token.
func execSocketToken(r *http.Request) (string, bool) {
	if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") || !isExecSocketPath(r.URL.Path) {
		return "", false
	}
	for _, h := range r.Header.Values("Sec-WebSocket-Protocol") {
		for p := range strings.SplitSeq(h, ",") {
			if tok, ok := strings.CutPrefix(strings.TrimSpace(p), api.TokenSubprotocolPrefix); ok && tok != "" {
				return tok, true
			}
		}
	}
	return "", false
}

// isExecSocketPath reports whether path is /v1/sandboxes/NAME/exec/ws.
func isExecSocketPath(path string) bool {
	rest, ok := strings.CutPrefix(path, "/v1/sandboxes/")
	if !ok {
		return false
	}
	name, ok := strings.CutSuffix(rest, "/exec/ws")
	return ok && name != "" && !strings.Contains(name, "/")
}

// area is what a route is about, for the scope rules.
type area int

const (
	areaOpen      area = iota // health, the spec, one's own requests: anyone let in
	areaSandboxes             // sandboxes and all within them
	areaImages                // read by all, changed by admins
	areaTokens                // admins only
	areaAudit
	areaSecrets
	areaOwners // the list of owners and changes to them: admins only
	areaOwner  // one owner: read by admins and by the owner itself
	areaMetrics
	areaOther // a route nobody classified: admins only
)

func areaOf(path string) area {
	switch {
	case path == "/v1/health" || path == "/v1/openapi.yaml":
		return areaOpen
	case strings.HasPrefix(path, "/v1/requests/"):
		return areaOpen // each caller sees only its own
	case path == "/v1/ssh-keys" || strings.HasPrefix(path, "/v1/ssh-keys/"):
		return areaOpen // each token its own keys; admins every key
	case strings.HasPrefix(path, "/v1/sandboxes/") && strings.HasSuffix(path, "/secrets"):
		return areaSecrets // granting a secret hands out its value
	case path == "/v1/sandboxes" || strings.HasPrefix(path, "/v1/sandboxes/"):
		return areaSandboxes
	case path == "/v1/events":
		return areaSandboxes // each owner its own sandboxes' events
	case path == "/v1/images" || strings.HasPrefix(path, "/v1/images/"):
		return areaImages
	case path == "/v1/tokens" || strings.HasPrefix(path, "/v1/tokens/"):
		return areaTokens
	case path == "/v1/audit":
		return areaAudit
	case path == "/v1/secrets" || strings.HasPrefix(path, "/v1/secrets/"):
		return areaSecrets
	case path == "/v1/owners":
		return areaOwners
	case strings.HasPrefix(path, "/v1/owners/"):
		return areaOwner
	case path == "/metrics":
		return areaMetrics
	}
	return areaOther
}

// mutating reports whether a route changes something. Exec over a
// WebSocket is a GET that runs a command, and a signed port URL is a GET
// that hands out access, so they count.
func mutating(method, pattern string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return pattern == "/v1/sandboxes/{name}/exec/ws" || pattern == portproxy.URLPattern
	}
	return true
}

// audited reports whether a call is recorded in the audit log: those that
// change something, except what goes through an exposed port, which is
// the application's traffic, and MCP's envelopes.
func audited(method, pattern string) bool {
	return mutating(method, pattern) && !portproxy.IsProxy(pattern) && pattern != mcpPath
}

// mcpPath serves the Model Context Protocol. Its requests are not audited
// themselves: each tool call is, as the API call it makes.
const mcpPath = "/mcp"

// allow applies the scope rules that need no lookup.
func allow(p auth.Principal, a area, mutates bool) error {
	if mutates && p.Scope.ReadOnly() {
		return errdefs.WithHint(auth.Forbidden("token %q has the read-only scope %s: it cannot change anything", p.Name, p.Scope),
			"use a token of scope owner or admin for this")
	}
	adminOnly := func(what string) error {
		if p.Scope.Admin() {
			return nil
		}
		return errdefs.WithHint(auth.Forbidden("only an admin can %s", what),
			"use dend's unix socket as root, or a token of scope admin")
	}
	switch a {
	case areaOpen, areaSandboxes:
		return nil
	case areaImages:
		if mutates {
			return adminOnly("change images (they are shared by every token)")
		}
		return nil
	case areaTokens:
		return adminOnly("manage API tokens")
	case areaAudit:
		return adminOnly("read the audit log")
	case areaSecrets:
		return adminOnly("manage secrets")
	case areaOwners:
		return adminOnly("list owners' quotas")
	case areaMetrics:
		return adminOnly("read dend's metrics (every owner's sandboxes are in them)")
	case areaOwner:
		if mutates {
			return adminOnly("set an owner's quota or grants")
		}
		return nil // the handler lets an owner read only its own
	}
	return adminOnly("use this route")
}

// guard wraps a route's handler in the scope rules.
func (s *server) guard(rt route, query []string) handlerFunc {
	a, mutates := areaOf(rt.path), mutating(rt.method, rt.path)
	call := func(w http.ResponseWriter, r *http.Request) error {
		// After the scope rules: a sandbox the caller may not see is
		// not found, whatever the query says.
		if err := checkQuery(rt, query, r); err != nil {
			return err
		}
		return rt.fn(w, r)
	}
	return func(w http.ResponseWriter, r *http.Request) error {
		info := httpx.InfoOf(r)
		info.Route = rt.path
		if info.Grant != nil {
			if !portproxy.Covers(info.Grant, rt.path, r) {
				return portproxy.GrantNotFor()
			}
			portproxy.UseGrant(r, info)
			if sent, err := s.forward(w, r, info); sent || err != nil {
				return err
			}
			return call(w, r)
		}
		ref := r.PathValue("name")
		if a == areaSandboxes {
			info.Sandbox = ref
		}
		// A WebSocket through an exposed port can do anything a POST can.
		changes := mutates || (portproxy.IsProxy(rt.path) && r.Header.Get("Upgrade") != "")
		if err := allow(info.Principal, a, changes); err != nil {
			return err
		}
		if a == areaSandboxes && ref != "" {
			if err := s.scopeSandbox(r, info); err != nil {
				return err
			}
			if sent, err := s.forward(w, r, info); sent || err != nil {
				return err
			}
		}
		return call(w, r)
	}
}

// scopeSandbox resolves the sandbox a route names for the principal. For
// an owner scope, a sandbox it may not see is not found, word for word as
// one that does not exist; one it may see is then named by its id, so the
// call acts on exactly the sandbox checked even if its name changes hands
// meanwhile. Admins reach every sandbox and nothing is looked up: the
// audit keeps the name or id they gave.
func (s *server) scopeSandbox(r *http.Request, info *httpx.Info) error {
	ref := r.PathValue("name")
	p := info.Principal
	if p.Scope.Admin() {
		return nil
	}
	sb, err := s.ownSandbox(r.Context(), p, ref)
	if err != nil {
		return err
	}
	info.SandboxID, info.Sandbox, info.Found = sb.ID, sb.Name, sb
	r.SetPathValue("name", sb.ID)
	return nil
}

// ownSandbox returns the sandbox ref names among p's owner identity's;
// any other is not found, in the words for one that does not exist.
func (s *server) ownSandbox(ctx context.Context, p auth.Principal, ref string) (*sandbox.Sandbox, error) {
	if !p.Scope.Owned() || p.Owner == "" {
		return nil, sandbox.NotFound(ref)
	}
	return s.sandboxes.GetOwned(ctx, p.Owner, ref)
}

// scopeFrom checks the checkpoint a create starts from, for an owner
// scope: it must be one of the principal's sandboxes'. It returns it as
// SANDBOX-ID:CHECKPOINT, which the service looks up among that sandbox's
// checkpoints only. A checkpoint of another's sandbox is not found, as one
// that does not exist.
func (s *server) scopeFrom(ctx context.Context, p auth.Principal, from string) (string, error) {
	if from == "" || p.Scope.Admin() {
		return from, nil
	}
	if sbRef, name, ok := strings.Cut(from, ":"); ok {
		sb, err := s.ownSandbox(ctx, p, sbRef)
		if err != nil {
			return "", err
		}
		return sb.ID + ":" + name, nil
	}
	sbs, err := s.sandboxes.List(ctx)
	if err != nil {
		return "", err
	}
	for _, sb := range sbs {
		if !p.Sees(sb.Owner) {
			continue
		}
		cks, err := s.checkpoints.Checkpoints(ctx, sb.ID)
		if err != nil {
			return "", err
		}
		for _, ck := range cks {
			if ck.ID == from {
				return sb.ID + ":" + ck.ID, nil
			}
		}
	}
	return "", errdefs.WithHint(errdefs.NotFound("checkpoint %q not found", from), "name a checkpoint by its id, or as SANDBOX:NAME")
}

// visible keeps the sandboxes p may see.
func visible(p auth.Principal, sbs []*sandbox.Sandbox) []*sandbox.Sandbox {
	if p.Scope.Admin() {
		return sbs
	}
	out := []*sandbox.Sandbox{}
	for _, sb := range sbs {
		if p.Sees(sb.Owner) {
			out = append(out, sb)
		}
	}
	return out
}

// hideNeeds drops, for an owner scope, the names of sandboxes it may not
// see from what depends on each checkpoint. It returns copies.
func (s *server) hideNeeds(r *http.Request, cks ...*sandbox.Checkpoint) ([]*sandbox.Checkpoint, error) {
	p := httpx.PrincipalOf(r)
	if p.Scope.Admin() {
		return cks, nil
	}
	sbs, err := s.sandboxes.List(r.Context())
	if err != nil {
		return nil, err
	}
	mine := map[string]bool{}
	for _, sb := range visible(p, sbs) {
		mine[sb.Name] = true
	}
	out := make([]*sandbox.Checkpoint, len(cks))
	for i, ck := range cks {
		c := *ck
		c.NeededBy = nil
		for _, n := range ck.NeededBy {
			if mine[n] {
				c.NeededBy = append(c.NeededBy, n)
			}
		}
		out[i] = &c
	}
	return out, nil
}

// Audit entries are written when the call is over, under a context of
// their own: a caller that hangs up does not erase its trace.
const (
	auditTimeout = 10 * time.Second
	maxAuditPath = 512
)

// auditCalls records every call that changes, or tries to change,
// something, once it is answered.
func (s *server) auditCalls(next http.Handler) http.Handler {
	if s.audit == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := asRecorder(w)
		start := time.Now()
		info := httpx.InfoOf(r)
		defer func() {
			status := rec.status
			v := recover()
			if v != nil && status == 0 {
				status = http.StatusInternalServerError
			}
			// A request let in by a port grant can change nothing of den's.
			if audited(r.Method, info.Route) && info.Grant == nil && !info.SentOn {
				s.record(r, info, start, status)
			}
			if v != nil {
				panic(v)
			}
		}()
		next.ServeHTTP(rec, r)
	})
}

func (s *server) record(r *http.Request, info *httpx.Info, start time.Time, status int) {
	if status == 0 {
		status = http.StatusOK
	}
	path := r.URL.Path
	if len(path) > maxAuditPath {
		path = path[:maxAuditPath]
	}
	p := info.Principal
	e := &audit.Entry{
		Time: start, TokenID: p.TokenID, TokenName: p.Name, Method: r.Method, Route: info.Route, Path: path,
		SandboxID: info.SandboxID, Sandbox: info.Sandbox, Status: status, Error: info.ErrMsg,
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), auditTimeout)
	defer cancel()
	if err := s.audit.RecordAudit(ctx, e); err != nil {
		s.log.Error("recording a call in the audit log", "method", r.Method, "path", path, "who", p.String(), "status", status, "err", err)
	}
}
