package mcpserver

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/den-dev/den/internal/errdefs"
)

// Limits bound the sessions dend's /mcp keeps open. Each session holds
// some memory until its client ends it (DELETE) or it goes idle.
type Limits struct {
	// PerCaller is the most sessions one caller (one API token) may
	// hold open at once.
	PerCaller int
	// Total is the most sessions all token holders together may hold
	// open; root's sessions on the unix socket have a bound of their own
	// of the same size.
	Total int
	// IdleTimeout closes a session that has had no request for this long.
	IdleTimeout time.Duration
}

// Defaults of Limits. A session costs dend about 20 KiB, so the bounds
// are about places, not memory: enough for one token's several agents,
// and an idle timeout long enough that an agent thinking between tool
// calls keeps its session (most MCP clients do not open a new one by
// themselves when theirs is gone).
const (
	DefaultSessionsPerToken = 16
	DefaultSessions         = 256
	DefaultIdleTimeout      = 30 * time.Minute
)

// DefaultLimits are the bounds dend keeps when told none.
func DefaultLimits() Limits {
	return Limits{PerCaller: DefaultSessionsPerToken, Total: DefaultSessions, IdleTimeout: DefaultIdleTimeout}
}

// withDefaults is l with its zero fields at their defaults.
func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.PerCaller == 0 {
		l.PerCaller = d.PerCaller
	}
	if l.Total == 0 {
		l.Total = d.Total
	}
	if l.IdleTimeout == 0 {
		l.IdleTimeout = d.IdleTimeout
	}
	return l
}

// Validate names the first bad field, by its dend flag.
func (l Limits) Validate() error {
	switch {
	case l.PerCaller < 1:
		return errdefs.WithHint(errdefs.Invalid("mcp-sessions-per-token: %d is not a positive number of sessions", l.PerCaller),
			fmt.Sprintf("give 1 or more (default %d)", DefaultSessionsPerToken))
	case l.Total < 1:
		return errdefs.WithHint(errdefs.Invalid("mcp-sessions: %d is not a positive number of sessions", l.Total),
			fmt.Sprintf("give 1 or more (default %d)", DefaultSessions))
	case l.IdleTimeout < time.Second:
		return errdefs.WithHint(errdefs.Invalid("mcp-idle-timeout: %s is under the 1s minimum", l.IdleTimeout),
			fmt.Sprintf("give a duration like 30m (default %s)", DefaultIdleTimeout))
	}
	return nil
}

// sessionHeader carries a session's id, both ways (MCP's streamable
// HTTP transport).
const sessionHeader = "Mcp-Session-Id"

// sessions stands in front of the SDK's streamable HTTP handler for one
// door: it opens a new session only while its caller and the door are
// under their bounds, and lets a session be used and ended only by the
// caller who opened it. The SDK closes sessions (DELETE, idle timeout,
// a failed initialize); each session's watcher then gives its place back.
type sessions struct {
	perCaller, total int          // perCaller 0: the total alone
	srv              *mcp.Server  // the server every session of the door runs
	sdk              http.Handler // the SDK's handler, which keeps the sessions

	mu     sync.Mutex
	owners map[string]string // session id → the caller who opened it
	open   map[string]int    // caller → its sessions, open or being opened
	n      int               // all sessions, open or being opened
}

func newSessions(srv *mcp.Server, sdk http.Handler, perCaller, total int) *sessions {
	return &sessions{perCaller: perCaller, total: total, srv: srv, sdk: sdk,
		owners: map[string]string{}, open: map[string]int{}}
}

// serve answers r for caller.
func (s *sessions) serve(w http.ResponseWriter, r *http.Request, caller string) {
	if id := r.Header.Get(sessionHeader); id != "" {
		s.serveSession(w, r, caller, id)
		return
	}
	if r.Method != http.MethodPost {
		s.sdk.ServeHTTP(w, r) // the SDK refuses it: no session named
		return
	}
	// A POST without a session id opens one.
	if refused := s.reserve(caller); refused != nil {
		writeTooMany(w, refused)
		return
	}
	ow := &opening{ResponseWriter: w, note: func(h http.Header) string {
		id := h.Get(sessionHeader)
		if id != "" {
			s.mu.Lock()
			s.owners[id] = caller
			s.mu.Unlock()
		}
		return id
	}}
	s.sdk.ServeHTTP(ow, r)
	id := ow.opened()
	if id == "" {
		s.unreserve(caller)
		return
	}
	var ss *mcp.ServerSession
	for x := range s.srv.Sessions() {
		if x.ID() == id {
			ss = x
			break
		}
	}
	if ss == nil { // already closed: the initialize failed
		s.end(id)
		return
	}
	go func() {
		ss.Wait()
		s.end(id)
	}()
}

// serveSession answers a request that names session id.
func (s *sessions) serveSession(w http.ResponseWriter, r *http.Request, caller, id string) {
	// Another caller's session is, to this one, no session at all: the
	// SDK's own answer for an id it does not know.
	s.mu.Lock()
	owner, ok := s.owners[id]
	s.mu.Unlock()
	if !ok || owner != caller {
		http.Error(w, "session not found", http.StatusNotFound)
		return
	}
	if r.Method != http.MethodDelete {
		s.sdk.ServeHTTP(w, r)
		return
	}
	// A session ended by DELETE gives its place back at once, so that
	// the client may open another right after.
	sw := &statusWriter{ResponseWriter: w}
	s.sdk.ServeHTTP(sw, r)
	if sw.code == http.StatusNoContent {
		s.end(id)
	}
}

// tooMany is a refused session: the bound met, and how to get under it.
type tooMany struct{ msg, hint string }

// reserve takes a place for a session caller opens, or says which bound
// is met.
func (s *sessions) reserve(caller string) *tooMany {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.perCaller > 0 && s.open[caller] >= s.perCaller:
		return &tooMany{
			msg: fmt.Sprintf("this token has %d MCP sessions open, its limit", s.open[caller]),
			hint: "end sessions you no longer use (an MCP client's close sends DELETE /mcp with the Mcp-Session-Id header), " +
				"or wait for idle ones to be closed; the operator sets the limit with dend's --mcp-sessions-per-token",
		}
	case s.n >= s.total:
		return &tooMany{
			msg:  fmt.Sprintf("dend has %d MCP sessions open, its limit", s.n),
			hint: "retry later, when idle sessions have been closed; the operator sets the limit with dend's --mcp-sessions",
		}
	}
	s.open[caller]++
	s.n++
	return nil
}

// unreserve gives back a place reserve took for a session that was not
// opened.
func (s *sessions) unreserve(caller string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.releaseLocked(caller)
}

// end gives back the place of session id; it may be called more than
// once for a session.
func (s *sessions) end(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	caller, ok := s.owners[id]
	if !ok {
		return
	}
	delete(s.owners, id)
	s.releaseLocked(caller)
}

func (s *sessions) releaseLocked(caller string) {
	if s.open[caller]--; s.open[caller] <= 0 {
		delete(s.open, caller)
	}
	s.n--
}

// writeTooMany answers a refused session: 429, with a JSON-RPC error
// whose data carries den's hint.
func writeTooMany(w http.ResponseWriter, err *tooMany) {
	body, _ := json.Marshal(map[string]any{
		"jsonrpc": "2.0",
		"id":      nil,
		"error": map[string]any{
			"code":    codeTooManySessions,
			"message": err.msg + " (hint: " + err.hint + ")",
			"data":    map[string]string{"code": "too_many_sessions", "hint": err.hint},
		},
	})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusTooManyRequests)
	w.Write(body)
}

// codeTooManySessions is the JSON-RPC error code of a refused session, in
// the range JSON-RPC leaves to servers.
const codeTooManySessions = -32001

// opening is the response to a request that may open a session. It
// notes the session's id, and so its owner, before the header that
// tells the client the id goes out: the client cannot use the id before
// its owner is known.
type opening struct {
	http.ResponseWriter
	note func(http.Header) string

	once sync.Once
	id   string
}

func (o *opening) noteOnce() { o.once.Do(func() { o.id = o.note(o.Header()) }) }

// opened is the id of the session the request opened, or "" for none;
// call it once the handler returned.
func (o *opening) opened() string {
	o.noteOnce()
	return o.id
}

func (o *opening) WriteHeader(code int) {
	o.noteOnce()
	o.ResponseWriter.WriteHeader(code)
}

func (o *opening) Write(p []byte) (int, error) {
	o.noteOnce()
	return o.ResponseWriter.Write(p)
}

// FlushError sends the header too: note it first.
func (o *opening) FlushError() error {
	o.noteOnce()
	return http.NewResponseController(o.ResponseWriter).Flush()
}

func (o *opening) Unwrap() http.ResponseWriter { return o.ResponseWriter }

// statusWriter remembers the status of a response.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (sw *statusWriter) WriteHeader(code int) {
	sw.code = code
	sw.ResponseWriter.WriteHeader(code)
}

func (sw *statusWriter) Unwrap() http.ResponseWriter { return sw.ResponseWriter }
