package client

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/den-dev/den/api"
)

// A lost connection. Every request that changes something carries a fresh
// Idempotency-Key, so dend runs it at most once and keeps its answer. When
// the connection drops after the request went out (dend killed or
// restarted mid-call, a proxy cut), the client does not guess: it sends
// the same request with the same key again, with backoff, until dend
// answers or DefaultReconnect (WithReconnect) passes. dend's answer is then
// the real outcome: the recorded answer if it was done; "still running"
// (wait more); "interrupted" if dend stopped while it ran, which becomes an
// error saying it may or may not have happened and what to check. A
// request whose body was a stream cannot be sent again: the client asks
// GET /v1/requests/{key} instead. A request never sent (dend not running)
// fails at once, as nothing happened.

// DefaultReconnect is how long a request keeps trying to reach dend again
// after its connection dropped.
const DefaultReconnect = 30 * time.Second

// Backoff between attempts to reach dend again.
const (
	firstBackoff = 100 * time.Millisecond
	maxBackoff   = 2 * time.Second
)

// What dend answered about a request sent again.
var (
	errStillRunning = errors.New("dend is still working on it")
	errNeverStarted = errors.New("dend has no record of it")
)

// changes reports whether a method changes something, and so carries an
// idempotency key.
func changes(method string) bool {
	switch method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}

// newKey returns a fresh idempotency key: 128 random bits.
func newKey() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

// reconnect learns the outcome of req, whose connection dropped with
// cause, by sending it again with the same key until dend answers.
func (c *Client) reconnect(ctx context.Context, req *http.Request, cause error) (*http.Response, error) {
	op := describe(req.Method, strings.TrimPrefix(req.URL.Path, c.base.Path), req.URL.Query())
	key := req.Header.Get(api.IdempotencyKeyHeader)
	c.tell(fmt.Sprintf("lost the connection to dend while %s (%s); asking it what became of %s", op.doing, rootCause(cause), op.noun))
	deadline := time.Now().Add(c.reconnectFor)
	last := cause
	for delay := firstBackoff; ; delay = min(2*delay, maxBackoff) {
		if time.Now().Add(delay).After(deadline) {
			return nil, c.lost(op, key, last)
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, c.lost(op, key, ctx.Err())
		case <-t.C:
		}
		resp, err := c.again(ctx, req, key)
		var answered *Error
		switch {
		case errors.Is(err, errNeverStarted):
			return nil, &Error{API: &api.Error{Code: api.CodeUnavailable,
				Message: fmt.Sprintf("lost the connection to dend while %s; dend came back with no record of it, so %s never started", op.doing, op.noun),
				Hint:    "send it again"}, err: cause, key: key}
		case errors.As(err, &answered):
			return nil, c.outcome(op, answered)
		case err != nil:
			last = err
			continue
		case resp.Header.Get(api.IdempotencyStatusHeader) == api.IdempotencyInProgress:
			resp.Body.Close()
			last = errStillRunning
			continue
		case resp.Header.Get(api.IdempotencyStatusHeader) == api.IdempotencyInterrupted:
			defer resp.Body.Close()
			return nil, interrupted(op, key, decodeError(resp), c.stateOf(ctx, op.sandbox))
		case resp.Header.Get(api.IdempotencyStatusHeader) == api.IdempotencyNotKept:
			// Done, but the answer (a new token's secret) is gone: the
			// error says what to do instead.
			defer resp.Body.Close()
			c.tell(fmt.Sprintf("lost the connection to dend while %s; it came back and %s had completed, but its answer was not kept", op.doing, op.noun))
			return nil, decodeError(resp)
		}
		if resp.StatusCode/100 == 2 {
			c.tell(fmt.Sprintf("lost the connection to dend while %s; it came back and %s had completed", op.doing, op.noun))
		} else {
			c.tell(fmt.Sprintf("lost the connection to dend while %s; it came back and %s had failed", op.doing, op.noun))
		}
		return resp, nil
	}
}

// again sends req once more with its key, or, when its body was a stream
// that cannot be read twice, asks dend for the record of the key. An
// *Error is dend's final word; other errors are worth another try.
func (c *Client) again(ctx context.Context, req *http.Request, key string) (*http.Response, error) {
	if req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
		return c.recorded(ctx, key)
	}
	r := req.Clone(ctx)
	if req.GetBody != nil {
		body, err := req.GetBody()
		if err != nil {
			return nil, err
		}
		r.Body = body
	}
	return c.hc.Do(r)
}

// recorded asks dend what became of the request of key, and turns the
// answer into the response the request would have had.
func (c *Client) recorded(ctx context.Context, key string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url("", "/requests/"+url.PathEscape(key), nil), nil)
	if err != nil {
		return nil, err
	}
	c.header(req.Header)
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return nil, errNeverStarted
	}
	if resp.StatusCode != http.StatusOK {
		return nil, decodeError(resp)
	}
	var st api.RequestStatus
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return nil, fmt.Errorf("decoding GET /requests/%s: %w", key, err)
	}
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set(api.IdempotencyStatusHeader, api.IdempotencyReplayed)
	body := []byte(st.Response)
	if st.Error != nil {
		body, _ = json.Marshal(api.ErrorBody{Error: st.Error})
	}
	switch st.State {
	case api.RequestInProgress:
		return nil, errStillRunning
	case api.RequestInterrupted:
		h.Set(api.IdempotencyStatusHeader, api.IdempotencyInterrupted)
		st.Status = http.StatusConflict
		body, _ = json.Marshal(api.ErrorBody{Error: &api.Error{Code: api.CodeConflict, Message: "interrupted", Hint: st.Hint}})
	}
	return &http.Response{StatusCode: st.Status, Header: h, Body: io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)), Request: req}, nil
}

// tell passes a notice on, if someone listens.
func (c *Client) tell(msg string) {
	c.log.Warn(msg)
	if c.notice != nil {
		c.notice(msg)
	}
}

// operation is a request in words, for messages.
type operation struct {
	doing   string // "restoring sandbox s4"
	noun    string // "the restore"
	check   string // "den inspect s4": how to see whether it happened
	sandbox string // "s4", when about one
}

// sandboxVerbs names the POSTs to /sandboxes/{name}/VERB: what doing it
// is called, and what it is called once done.
var sandboxVerbs = map[string][2]string{
	"start":       {"starting", "the start"},
	"stop":        {"stopping", "the stop"},
	"pause":       {"pausing", "the pause"},
	"resume":      {"resuming", "the resume"},
	"hibernate":   {"hibernating", "the hibernation"},
	"recover":     {"recovering", "the recovery"},
	"restore":     {"restoring", "the restore"},
	"fork":        {"forking", "the fork"},
	"checkpoints": {"checkpointing", "the checkpoint"},
}

// describe puts a request in words; path is under /v1, query its query.
// Every request that changes something has words of its own, so that a
// user who lost the connection reads what was being done, not a URL.
func describe(method, path string, query url.Values) operation {
	parts := strings.Split(strings.TrimPrefix(strings.TrimPrefix(path, "/"+api.Version), "/"), "/")
	for i, p := range parts {
		if u, err := url.PathUnescape(p); err == nil {
			parts[i] = u
		}
	}
	switch parts[0] {
	case "sandboxes":
		if len(parts) == 1 {
			return operation{doing: "creating a sandbox", noun: "the create", check: "den ls"}
		}
		return describeSandbox(method, parts[1], parts[2:], query)
	case "images":
		op := operation{noun: "the request", check: "den image ls"}
		switch {
		case len(parts) == 2 && method == http.MethodPost && parts[1] == "build":
			op.doing, op.noun = "building an image", "the build"
		case len(parts) == 2 && method == http.MethodPost && parts[1] == "import":
			op.doing, op.noun = "importing image "+query.Get("name"), "the import"
		case len(parts) == 2 && method == http.MethodPost && parts[1] == "pull":
			op.doing, op.noun = "pulling an image", "the pull"
		case len(parts) == 2 && method == http.MethodDelete:
			op.doing, op.noun = "removing image "+parts[1], "the removal"
		default:
			op.doing = "sending " + method + " " + path
		}
		return op
	case "tokens":
		if method == http.MethodPost {
			return operation{doing: "creating a token", noun: "the token", check: "den token ls"}
		}
		return operation{doing: "revoking token " + parts[len(parts)-1], noun: "the revocation", check: "den token ls"}
	case "secrets":
		if method == http.MethodPut {
			return operation{doing: "setting secret " + parts[len(parts)-1], noun: "the change", check: "den secret ls"}
		}
		return operation{doing: "removing secret " + parts[len(parts)-1], noun: "the removal", check: "den secret ls"}
	case "owners":
		return operation{doing: "changing owner " + parts[len(parts)-1], noun: "the change", check: "den owner show " + parts[len(parts)-1]}
	}
	return operation{doing: "sending " + method + " " + path, noun: "the request"}
}

// describeSandbox puts a request about sandbox name in words; rest is
// the path after /sandboxes/{name}.
func describeSandbox(method, name string, rest []string, query url.Values) operation {
	op := operation{check: "den inspect " + name, noun: "the request", sandbox: name}
	verb := ""
	if len(rest) > 0 {
		verb = rest[0]
	}
	switch {
	case len(rest) == 0 && method == http.MethodDelete:
		op.doing, op.noun = "removing sandbox "+name, "the removal"
	case len(rest) == 1 && method == http.MethodPost && verb == "exec":
		op.doing, op.noun, op.check = "starting a command in sandbox "+name, "the command", "den runs "+name
	case len(rest) == 1 && method == http.MethodPost && sandboxVerbs[verb][0] != "":
		op.doing, op.noun = sandboxVerbs[verb][0]+" sandbox "+name, sandboxVerbs[verb][1]
	case len(rest) == 1 && (method == http.MethodPut || method == http.MethodPatch):
		op.doing, op.noun = "changing the "+verb+" of sandbox "+name, "the change"
	case len(rest) == 2 && verb == "checkpoints" && method == http.MethodDelete:
		op.doing, op.noun, op.check = "removing checkpoint "+rest[1]+" of sandbox "+name, "the removal", "den checkpoints "+name
	case verb == "files":
		where := query.Get("path")
		op.noun, op.check = "the change", "den exec "+name+" -- ls -la "+shellQuote(path.Dir(where))
		switch {
		case len(rest) == 2 && rest[1] == "content":
			op.doing, op.noun, op.check = "writing "+where+" in sandbox "+name, "the write", "den exec "+name+" -- ls -la "+shellQuote(where)
		case len(rest) == 2 && rest[1] == "archive":
			op.doing, op.noun, op.check = "copying files into "+where+" in sandbox "+name, "the copy", "den exec "+name+" -- ls -la "+shellQuote(where)
		case len(rest) == 1 && method == http.MethodDelete:
			op.doing, op.noun = "removing "+where+" in sandbox "+name, "the removal"
		default:
			op.doing = "changing files in sandbox " + name
			op.check = "den exec " + name + " -- ls -la"
		}
	case len(rest) == 3 && verb == "runs" && rest[2] == "signal":
		op.doing, op.noun, op.check = "signalling run "+rest[1]+" in sandbox "+name, "the signal", "den runs "+name
	case len(rest) >= 2 && verb == "ports":
		op.check = "den port ls " + name
		switch {
		case method == http.MethodPut:
			op.doing, op.noun = "exposing port "+rest[1]+" of sandbox "+name, "the change"
		case len(rest) == 3 && rest[2] == "url":
			op.doing, op.noun = "revoking the links to port "+rest[1]+" of sandbox "+name, "the revocation"
		default:
			op.doing, op.noun = "closing port "+rest[1]+" of sandbox "+name, "the change"
		}
	default:
		op.doing = "changing sandbox " + name + " (" + method + " " + strings.Join(rest, "/") + ")"
	}
	return op
}

// shellQuote quotes s for a POSIX shell, when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+=:,@") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// lost is the error of a request whose connection dropped and whose
// outcome dend never told.
func (c *Client) lost(op operation, key string, cause error) *Error {
	where := c.base.Host
	if c.socket != "" {
		where = c.socket
	}
	e := &api.Error{Code: api.CodeUnavailable,
		Message: fmt.Sprintf("lost the connection to dend while %s, and dend is not answering at %s (%s): %s may or may not have happened",
			op.doing, where, rootCause(cause), op.noun)}
	switch {
	case errors.Is(cause, errStillRunning):
		e.Message = fmt.Sprintf("lost the connection to dend while %s; it came back but is still working on it, so %s may or may not happen",
			op.doing, op.noun)
	case errors.Is(cause, context.Canceled) || errors.Is(cause, context.DeadlineExceeded):
		e.Message = fmt.Sprintf("lost the connection to dend while %s, and stopped waiting for it (%s): %s may or may not have happened",
			op.doing, cause, op.noun)
	}
	e.Hint = checkHint(op, key)
	return &Error{API: e, err: cause, key: key, unknown: true}
}

// interrupted is the error of a request dend stopped in the middle of;
// state is what its sandbox is now, when known.
func interrupted(op operation, key string, answer *Error, state string) *Error {
	e := &api.Error{Code: api.CodeConflict,
		Message: fmt.Sprintf("lost the connection to dend while %s, and dend was interrupted before it finished: %s may or may not have happened",
			op.doing, op.noun),
		Hint: checkHint(op, key)}
	if state != "" {
		e.Message += fmt.Sprintf(" (sandbox %s is now %s)", op.sandbox, state)
	}
	return &Error{StatusCode: answer.StatusCode, API: e, key: key, unknown: true}
}

// stateOf is the state of sandbox name now, or "" when it cannot be
// told (no name, no such sandbox, dend not answering).
func (c *Client) stateOf(ctx context.Context, name string) string {
	if name == "" {
		return ""
	}
	sb, err := c.GetSandbox(ctx, name)
	if err != nil {
		return ""
	}
	return sb.State
}

// outcome marks dend's answer to a request sent again as the outcome of
// op, after a lost connection.
func (c *Client) outcome(op operation, answer *Error) *Error {
	if answer.unknown {
		return answer
	}
	c.tell(fmt.Sprintf("lost the connection to dend while %s; it came back and %s had failed", op.doing, op.noun))
	return answer
}

func checkHint(op operation, key string) string {
	if op.check != "" {
		return fmt.Sprintf("check with `%s`; dend keeps what became of it for a day: GET /v1/requests/%s", op.check, key)
	}
	return fmt.Sprintf("ask dend what became of it: GET /v1/requests/%s (kept a day)", key)
}

// Request tells what became of a request sent with the idempotency key
// key (see RequestKey). It is not found when dend has no record of it for
// this caller: never received, or more than a day old.
func (c *Client) Request(ctx context.Context, key string) (*api.RequestStatus, error) {
	var st api.RequestStatus
	if err := c.do(ctx, http.MethodGet, "/requests/"+url.PathEscape(key), nil, nil, &st); err != nil {
		return nil, err
	}
	return &st, nil
}
