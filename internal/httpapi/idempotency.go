package httpapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/internal/auth"
	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/httpapi/httpx"
	"github.com/den-dev/den/internal/httpapi/portproxy"
	"github.com/den-dev/den/internal/idempotency"
)

// Idempotency keys: a mutating request may carry an Idempotency-Key. Before
// it runs, its key, its caller and a fingerprint of what it asks are
// recorded (in progress); once answered, its status and body. A repeat of
// the key by the same caller is then answered from the record:
//
//	same request, done         → the recorded answer (Idempotency-Status: replayed)
//	same request, in progress  → 409 (Idempotency-Status: in-progress)
//	same request, interrupted  → 409 (Idempotency-Status: interrupted): dend
//	                             stopped while it ran; it may or may not have
//	                             taken effect
//	another request            → 422
//
// A key belongs to its caller: the same key from another caller is another
// record, and GET /v1/requests/{key} finds only the caller's own.

// RequestStore keeps the idempotency records; *sqlite.Store implements it.
type RequestStore interface {
	BeginRequest(ctx context.Context, r *idempotency.Record) (*idempotency.Record, bool, error)
	FinishRequest(ctx context.Context, r *idempotency.Record) error
	GetRequest(ctx context.Context, scope, key string) (*idempotency.Record, error)
}

// maxKeptAnswer bounds the body of an answer that is recorded for replay;
// a larger one is recorded without its body.
const maxKeptAnswer = 1 << 20

// finishTimeout bounds recording an answer, which runs even when the
// client has gone.
const finishTimeout = 10 * time.Second

// keyed reports whether a route takes an idempotency key: every method
// that changes something, except the application traffic through an
// exposed port, whose headers are the application's.
func keyed(rt route) bool {
	switch rt.method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return !portproxy.IsProxy(rt.path)
	}
	return false
}

// Secrets stay out of the records: the value PUT /v1/secrets/{name} sets
// is no part of its fingerprint (not even as a digest), and the token
// POST /v1/tokens answers with is not kept for a replay.
func secretBody(rt route) bool {
	return rt.method == http.MethodPut && rt.path == "/v1/secrets/{name}"
}

func secretAnswer(rt route) bool {
	// An export's answer is an agent's sealed archive, its key in a
	// header: nothing of it is kept either.
	return rt.method == http.MethodPost && (rt.path == "/v1/tokens" || rt.path == "/v1/sandboxes/{name}/export")
}

// callerScope is the caller a key belongs to: an owner identity (shared by
// its tokens, which reach the same sandboxes), else the token, else the
// caller without a token (root on the socket, the token file).
func callerScope(p auth.Principal) string {
	switch {
	case p.Scope.Owned() && p.Owner != "":
		return "owner:" + p.Owner
	case p.TokenID != "":
		return "token:" + p.TokenID
	}
	return "local:" + p.Name
}

// idempotent runs next at most once per idempotency key (see above).
// Requests without the header pass straight through.
func (s *server) idempotent(rt route, next http.Handler) http.Handler {
	if !keyed(rt) {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		keys := r.Header.Values(api.IdempotencyKeyHeader)
		// A request another node forwarded was recorded there.
		if len(keys) == 0 || httpx.InfoOf(r).Grant != nil || httpx.InfoOf(r).FromNode {
			next.ServeHTTP(w, r)
			return
		}
		if len(keys) > 1 {
			httpx.WriteError(s.log, w, r, errdefs.WithHint(errdefs.Invalid("%d %s headers: want one", len(keys), api.IdempotencyKeyHeader),
				"send one fresh key per request"))
			return
		}
		if err := idempotency.CheckKey(keys[0]); err != nil {
			httpx.WriteError(s.log, w, r, err)
			return
		}
		if s.requests == nil {
			next.ServeHTTP(w, r)
			return
		}
		limit := s.maxJSONBytes
		if secretBody(rt) {
			limit = 0
		}
		fp, err := fingerprint(r, limit)
		if err != nil {
			httpx.WriteError(s.log, w, r, err)
			return
		}
		rec := &idempotency.Record{
			Scope: callerScope(httpx.PrincipalOf(r)), Key: keys[0], Fingerprint: fp,
			Method: r.Method, Path: r.URL.Path, Route: rt.path, Sandbox: r.PathValue("name"),
		}
		existing, created, err := s.requests.BeginRequest(r.Context(), rec)
		if err != nil {
			// The store's classified errors say what they were doing.
			if errdefs.Class(err) == nil {
				err = fmt.Errorf("recording request %s %s: %w", r.Method, r.URL.Path, err)
			}
			httpx.WriteError(s.log, w, r, err)
			return
		}
		if !created {
			s.answerRepeat(w, r, existing, fp)
			return
		}
		cw := &captureWriter{ResponseWriter: w, overflow: secretAnswer(rt)}
		defer func() {
			v := recover()
			s.finish(r, rec, cw, v != nil)
			if v != nil {
				panic(v)
			}
		}()
		next.ServeHTTP(cw, r)
	})
}

// fingerprint identifies what r asks: its method, path, query and body.
// It reads the body, up to limit bytes, and puts back an equal one. A
// longer body (an upload) counts by its first limit bytes and its length;
// with limit 0, the body does not count.
func fingerprint(r *http.Request, limit int64) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s %s?%s\n", r.Method, r.URL.Path, r.URL.RawQuery)
	if limit == 0 {
		return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
	}
	head, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return "", errdefs.Invalid("reading the request body: %v", err)
	}
	h.Write(head)
	if int64(len(head)) > limit {
		fmt.Fprintf(h, "\n%d bytes", r.ContentLength)
		r.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(head), r.Body), r.Body}
	} else {
		r.Body = io.NopCloser(bytes.NewReader(head))
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// finish records the answer to rec's request, whatever became of the
// client. A request answered with nothing because its client went away
// was abandoned half-way: it is recorded interrupted, as it may or may not
// have taken effect.
func (s *server) finish(r *http.Request, rec *idempotency.Record, cw *captureWriter, panicked bool) {
	rec.State, rec.Status = idempotency.Done, cw.status
	switch {
	case panicked && cw.status == 0:
		rec.Status = http.StatusInternalServerError
	case cw.status == 0 && r.Context().Err() != nil:
		rec.State = idempotency.Interrupted
	case cw.status == 0:
		rec.Status = http.StatusOK // nothing written: net/http sends 200
	}
	if rec.State == idempotency.Done && !panicked && !cw.overflow {
		rec.Body, rec.BodyKept = cw.body.Bytes(), true
		rec.ContentType = cw.Header().Get("Content-Type")
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), finishTimeout)
	defer cancel()
	if err := s.requests.FinishRequest(ctx, rec); err != nil {
		s.log.Error("recording the answer to a request", "method", rec.Method, "path", rec.Path, "key", rec.Key, "err", err)
	}
}

// answerRepeat answers a request whose key was recorded already.
func (s *server) answerRepeat(w http.ResponseWriter, r *http.Request, rec *idempotency.Record, fp string) {
	what := fmt.Sprintf("request %q (%s %s)", rec.Key, rec.Method, rec.Path)
	if rec.Fingerprint != fp {
		httpx.NoteError(r, "idempotency key reused for another request")
		httpx.WriteJSONError(w, http.StatusUnprocessableEntity, &api.Error{
			Code:    api.CodeInvalid,
			Message: fmt.Sprintf("idempotency key %q was used at %s for another request (%s %s)", rec.Key, rec.StartedAt.Format(time.RFC3339), rec.Method, rec.Path),
			Hint:    "send a fresh key with each new request; repeat a key only to repeat the same request",
		})
		return
	}
	switch {
	case rec.State == idempotency.InProgress:
		w.Header().Set(api.IdempotencyStatusHeader, api.IdempotencyInProgress)
		httpx.WriteError(s.log, w, r, errdefs.WithHint(errdefs.Conflict("%s is still in progress, since %s", what, rec.StartedAt.Format(time.RFC3339)),
			"wait, then send it again with the same key, or ask GET /v1/requests/"+rec.Key))
	case rec.State == idempotency.Interrupted:
		w.Header().Set(api.IdempotencyStatusHeader, api.IdempotencyInterrupted)
		httpx.WriteError(s.log, w, r, errdefs.WithHint(errdefs.Conflict("%s was interrupted before it was answered (dend stopped, or its caller went away): it may or may not have taken effect", what),
			interruptedHint(rec)))
	case !rec.BodyKept:
		w.Header().Set(api.IdempotencyStatusHeader, api.IdempotencyNotKept)
		httpx.WriteError(s.log, w, r, errdefs.WithHint(errdefs.Conflict("%s was done (HTTP %d), but its answer was not kept (too large, or a secret)", what, rec.Status),
			notKeptHint(rec)))
	default:
		w.Header().Set(api.IdempotencyStatusHeader, api.IdempotencyReplayed)
		if rec.ContentType != "" {
			w.Header().Set("Content-Type", rec.ContentType)
		}
		w.WriteHeader(rec.Status)
		_, _ = w.Write(rec.Body)
	}
}

// notKeptHint says how to see the result of a request done whose answer
// was not kept.
func notKeptHint(rec *idempotency.Record) string {
	if rec.Route == "/v1/tokens" {
		return "the token was created, and its value is shown only once: see it with `den token ls`, revoke it with `den token rm`, and create another"
	}
	return "it took effect: look at its result directly"
}

// interruptedHint says how to learn whether an interrupted request took
// effect.
func interruptedHint(rec *idempotency.Record) string {
	if rec.Route == "/v1/sandboxes" {
		return "check with `den ls` (GET /v1/sandboxes) whether the sandbox was created, then send a new request with a new key if it is still needed"
	}
	if rec.Sandbox != "" {
		return fmt.Sprintf("check sandbox %s with `den inspect %s` (GET /v1/sandboxes/%s), then send a new request with a new key if it is still needed",
			rec.Sandbox, rec.Sandbox, rec.Sandbox)
	}
	return "check whether it took effect, then send a new request with a new key if it is still needed"
}

// getRequest tells the caller what became of one of its requests.
func (s *server) getRequest(w http.ResponseWriter, r *http.Request) error {
	key := r.PathValue("key")
	if err := idempotency.CheckKey(key); err != nil {
		return err
	}
	if s.requests == nil {
		return errdefs.Unavailable("this dend keeps no record of requests")
	}
	rec, err := s.requests.GetRequest(r.Context(), callerScope(httpx.PrincipalOf(r)), key)
	if err != nil {
		return errdefs.WithHint(err, fmt.Sprintf("records are kept %.0f hours and belong to the caller that sent them; a request never received has none",
			idempotency.DefaultRetention.Hours()))
	}
	return httpx.WriteJSON(w, http.StatusOK, toRequestStatus(rec))
}

func toRequestStatus(rec *idempotency.Record) api.RequestStatus {
	st := api.RequestStatus{
		Key: rec.Key, State: string(rec.State), Method: rec.Method, Path: rec.Path,
		StartedAt: rec.StartedAt, Sandbox: rec.Sandbox,
	}
	switch rec.State {
	case idempotency.Done:
		ended := rec.EndedAt
		st.EndedAt, st.Status = &ended, rec.Status
		if rec.BodyKept && strings.HasPrefix(rec.ContentType, "application/json") && json.Valid(rec.Body) {
			var env api.ErrorBody
			if rec.Status >= 400 && json.Unmarshal(rec.Body, &env) == nil && env.Error != nil {
				st.Error = env.Error
			} else {
				st.Response = json.RawMessage(bytes.TrimSpace(rec.Body))
			}
		}
	case idempotency.InProgress:
		st.Hint = "ask again later; it is still running"
	case idempotency.Interrupted:
		st.Hint = interruptedHint(rec)
	}
	return st
}

// captureWriter keeps a copy of what goes through it, up to
// maxKeptAnswer, for the record; none once overflow is set.
type captureWriter struct {
	http.ResponseWriter
	status   int
	body     bytes.Buffer
	overflow bool
}

func (c *captureWriter) WriteHeader(status int) {
	if c.status == 0 && status >= 200 {
		c.status = status
	}
	c.ResponseWriter.WriteHeader(status)
}

func (c *captureWriter) Write(b []byte) (int, error) {
	if c.status == 0 {
		c.status = http.StatusOK
	}
	if !c.overflow {
		if c.body.Len()+len(b) > maxKeptAnswer {
			c.overflow = true
			c.body = bytes.Buffer{}
		} else {
			c.body.Write(b)
		}
	}
	return c.ResponseWriter.Write(b)
}

func (c *captureWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }
