package httpapi

import (
	"net/http"
	"runtime/debug"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/internal/httpapi/httpx"
)

// recorder is a ResponseWriter that remembers whether the status line went
// out and which status it was. It unwraps to the real writer, so
// http.ResponseController can still flush and hijack through it.
type recorder struct {
	http.ResponseWriter
	status      int
	wroteHeader bool
}

// asRecorder returns w if it is already a recorder, else a recorder over w.
func asRecorder(w http.ResponseWriter) *recorder {
	if rec, ok := w.(*recorder); ok {
		return rec
	}
	return &recorder{ResponseWriter: w}
}

func (rec *recorder) WriteHeader(status int) {
	switch {
	case rec.wroteHeader:
	case status >= 200:
		rec.status, rec.wroteHeader = status, true
	case status == http.StatusSwitchingProtocols:
		rec.status = status // a WebSocket: the connection is hijacked next
	}
	rec.ResponseWriter.WriteHeader(status)
}

func (rec *recorder) Write(b []byte) (int, error) {
	if !rec.wroteHeader {
		rec.status, rec.wroteHeader = http.StatusOK, true
	}
	return rec.ResponseWriter.Write(b)
}

// FlushError sends the status line, if it has not gone out, and whatever
// is buffered. http.ResponseController calls it.
func (rec *recorder) FlushError() error {
	if !rec.wroteHeader {
		rec.status, rec.wroteHeader = http.StatusOK, true
	}
	return http.NewResponseController(rec.ResponseWriter).Flush()
}

// Flush is FlushError for code that only knows http.Flusher.
func (rec *recorder) Flush() { _ = rec.FlushError() }

func (rec *recorder) Unwrap() http.ResponseWriter { return rec.ResponseWriter }

// logRequests logs every request at Debug level once it is answered.
func (s *server) logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := asRecorder(w)
		start := time.Now()
		defer func() {
			status := rec.status
			if status == 0 {
				status = http.StatusOK // nothing written: net/http sends 200
			}
			s.log.Debug("request", "method", r.Method, "path", r.URL.Path, "status", status, "duration", time.Since(start))
		}()
		next.ServeHTTP(rec, r)
	})
}

// recoverPanics turns a panic in a handler into a 500 JSON answer (or a cut
// connection, if the answer had begun) and logs it with its stack. The
// sentinel http.ErrAbortHandler passes through: it is how a handler cuts
// a response short on purpose.
func (s *server) recoverPanics(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := asRecorder(w)
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.log.Error("panic in handler", "method", r.Method, "path", r.URL.Path, "panic", v, "stack", string(debug.Stack()))
			if rec.wroteHeader {
				panic(http.ErrAbortHandler)
			}
			httpx.WriteJSONError(rec, http.StatusInternalServerError, &api.Error{Code: api.CodeInternal, Message: httpx.InternalMessage})
		}()
		next.ServeHTTP(rec, r)
	})
}
