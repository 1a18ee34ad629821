package initd

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/guest"
	"github.com/den-dev/den/internal/initd/httpio"
)

// handlerFunc is a handler that returns its error instead of writing it.
// Once it has written a response, it returns nil.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// Handler returns den-init's routes, behind the token check.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	routes := map[string]handlerFunc{
		"GET /v1/ping":                     s.handlePing,
		"GET /v1/ps":                       s.handlePs,
		"POST /v1/procs":                   s.handleStart,
		"GET /v1/procs":                    s.handleList,
		"GET /v1/procs/{id}":               s.handleStatus,
		"DELETE /v1/procs/{id}":            s.handleRelease,
		"GET /v1/procs/{id}/stream":        s.handleStream,
		"POST /v1/procs/{id}/stdin":        s.handleStdin,
		"POST /v1/procs/{id}/ack":          s.handleAck,
		"POST /v1/procs/{id}/signal":       s.handleSignal,
		"POST /v1/procs/{id}/resize":       s.handleResize,
		"POST /v1/shutdown":                s.handleShutdown,
		"POST /v1/sync":                    s.handleSync,
		"POST /v1/scrub":                   s.handleScrub,
		"POST /v1/rekey":                   s.handleRekey,
		"POST /v1/claim":                   s.handleClaim,
		"POST /v1/limits":                  s.handleLimits,
		"PUT /v1/limits/checks":            s.handleLimitChecks,
		"GET /v1/files/stat":               s.files.Stat,
		"GET /v1/files/list":               s.files.List,
		"GET /v1/files/content":            s.files.Read,
		"PUT /v1/files/content":            s.files.Write,
		"POST /v1/files/mkdir":             s.files.Mkdir,
		"POST /v1/files/move":              s.files.Move,
		"DELETE /v1/files":                 s.files.Remove,
		"GET /v1/files/archive":            s.files.ReadTar,
		"GET /v1/files/watch":              s.files.Watch,
		"GET /v1/dial":                     s.handleDial,
		"PUT /v1/files/archive":            s.files.WriteTar,
		"PUT /v1/fence":                    s.handleFence,
		"GET /v1/fence":                    s.handleFenceState,
		"PUT /v1/services":                 s.handleSetServices,
		"GET /v1/services":                 s.handleServices,
		"POST /v1/services/{name}/restart": s.handleRestartService,
		"/":                                s.handleUnknown,
	}
	for pattern, h := range routes {
		mux.Handle(pattern, s.wrap(pattern, s.fenced(pattern, h)))
		// Every file route again, done as a user (asuser.go).
		if method, path, _ := strings.Cut(pattern, " "); strings.HasPrefix(path, "/v1/files") {
			as := method + " /v1/as/{user}" + strings.TrimPrefix(path, "/v1")
			mux.Handle(as, s.wrap(as, s.fenced(as, s.handleAs(h))))
		}
	}
	return s.authorize(mux)
}

// authorize refuses requests without the instance's current bearer token.
func (s *Server) authorize(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := []byte(r.Header.Get("Authorization"))
		if subtle.ConstantTimeCompare(got, *s.auth.Load()) != 1 {
			httpio.WriteJSON(w, http.StatusUnauthorized, guest.ErrorBody{
				Error: guest.Error{Code: "unauthorized", Message: "missing or wrong token"},
			})
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) wrap(route string, h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			s.writeError(w, route, err)
		}
	})
}

// writeError answers with err's class as code and status, its message and
// its hint. Errors without a class are internal.
func (s *Server) writeError(w http.ResponseWriter, route string, err error) {
	status, code := http.StatusInternalServerError, "internal"
	switch errdefs.Class(err) {
	case errdefs.ErrInvalid:
		status, code = http.StatusBadRequest, "invalid"
	case errdefs.ErrNotFound:
		status, code = http.StatusNotFound, "not_found"
	case errdefs.ErrConflict:
		status, code = http.StatusConflict, "conflict"
	case errdefs.ErrTooLarge:
		status, code = http.StatusRequestEntityTooLarge, "too_large"
	case errdefs.ErrUnavailable:
		status, code = http.StatusServiceUnavailable, "unavailable"
	default:
		s.log.Error("request failed", keyRoute, route, keyErr, err)
	}
	httpio.WriteJSON(w, status, guest.ErrorBody{
		Error: guest.Error{Code: code, Message: err.Error()},
		Hint:  errdefs.Hint(err),
	})
}

func (s *Server) handleUnknown(w http.ResponseWriter, r *http.Request) error {
	return errdefs.NotFound("no route %s %s", r.Method, r.URL.Path)
}

func (s *Server) handlePing(w http.ResponseWriter, r *http.Request) error {
	s.mu.Lock()
	info := s.info
	s.mu.Unlock()
	info.Procs = len(descendants(readProcTable(), os.Getpid()))
	info.OOMKills = s.limits.kills()
	info.LimitChecks = s.limits.checksMade()
	httpio.WriteJSON(w, http.StatusOK, info)
	return nil
}

func (s *Server) handleStart(w http.ResponseWriter, r *http.Request) error {
	var spec guest.ProcSpec
	var secrets []byte // the one copy of the secrets den-init has
	if r.Header.Get("Content-Type") == guest.ContentTypeSecrets {
		var err error
		if spec, secrets, err = readSecretStart(r); err != nil {
			return err
		}
	} else if err := httpio.DecodeJSON(w, r, &spec); err != nil {
		return err
	}
	p, err := s.startProc(spec)
	clear(secrets)
	spec.Secrets = nil
	if err != nil {
		return err
	}
	if r.URL.Query().Get("stream") != "1" {
		httpio.WriteJSON(w, http.StatusCreated, p.Status())
		return nil
	}
	started, _ := json.Marshal(p.Status())
	s.streamFrames(w, r, p, [2]int64{}, started)
	return nil
}

func (s *Server) handleList(w http.ResponseWriter, r *http.Request) error {
	s.mu.Lock()
	procs := s.listLocked()
	s.mu.Unlock()
	out := make([]guest.ProcStatus, 0, len(procs))
	for _, p := range procs {
		out = append(out, p.Status())
	}
	httpio.WriteJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) handleStatus(w http.ResponseWriter, r *http.Request) error {
	p, err := s.proc(r.PathValue("id"))
	if err != nil {
		return err
	}
	httpio.WriteJSON(w, http.StatusOK, p.Status())
	return nil
}

func (s *Server) handleRelease(w http.ResponseWriter, r *http.Request) error {
	p, err := s.proc(r.PathValue("id"))
	if err != nil {
		return err
	}
	if err := p.release(); err != nil {
		return err
	}
	s.mu.Lock()
	delete(s.procs, p.id)
	s.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) handleAck(w http.ResponseWriter, r *http.Request) error {
	p, err := s.proc(r.PathValue("id"))
	if err != nil {
		return err
	}
	var req guest.AckRequest
	if err := httpio.DecodeJSON(w, r, &req); err != nil {
		return err
	}
	if err := p.ack([2]int64{req.Stdout, req.Stderr}); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) handleSignal(w http.ResponseWriter, r *http.Request) error {
	p, err := s.proc(r.PathValue("id"))
	if err != nil {
		return err
	}
	var req guest.SignalRequest
	if err := httpio.DecodeJSON(w, r, &req); err != nil {
		return err
	}
	if req.Signal <= 0 || req.Signal > 64 {
		return errdefs.Invalid("no signal number %d", req.Signal)
	}
	if err := s.signal(p, syscall.Signal(req.Signal)); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) handleResize(w http.ResponseWriter, r *http.Request) error {
	p, err := s.proc(r.PathValue("id"))
	if err != nil {
		return err
	}
	var req guest.ResizeRequest
	if err := httpio.DecodeJSON(w, r, &req); err != nil {
		return err
	}
	if req.Rows == 0 || req.Cols == 0 {
		return errdefs.Invalid("terminal size %dx%d: rows and cols must be positive", req.Rows, req.Cols)
	}
	if err := p.resize(req.Rows, req.Cols); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) handleStdin(w http.ResponseWriter, r *http.Request) error {
	p, err := s.proc(r.PathValue("id"))
	if err != nil {
		return err
	}
	keepOpen := r.URL.Query().Get("close") == "0"
	if err := p.copyStdin(r.Body, keepOpen); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) handleShutdown(w http.ResponseWriter, r *http.Request) error {
	var req guest.ShutdownRequest
	if err := httpio.DecodeJSON(w, r, &req); err != nil {
		return err
	}
	if req.GraceMS < 0 {
		return errdefs.Invalid("negative grace %dms", req.GraceMS)
	}
	// Finish even if the host hangs up: half a shutdown helps nobody.
	s.Shutdown(context.WithoutCancel(r.Context()), time.Duration(req.GraceMS)*time.Millisecond)
	httpio.WriteJSON(w, http.StatusOK, struct{}{})
	return nil
}

func (s *Server) handleSync(w http.ResponseWriter, r *http.Request) error {
	syncFS()
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// syncFS flushes every file system to stable storage.
func syncFS() { unix.Sync() }

func (s *Server) setToken(token string) {
	b := []byte("Bearer " + token)
	s.auth.Store(&b)
}

// handleRekey replaces the token: from this answer on only the new one is
// accepted. A sandbox restored from another's memory image gets its own
// this way, so copies never share one.
func (s *Server) handleRekey(w http.ResponseWriter, r *http.Request) error {
	var req guest.RekeyRequest
	if err := httpio.DecodeJSON(w, r, &req); err != nil {
		return err
	}
	if len(req.Token) < guest.MinTokenLen {
		return errdefs.Invalid("token is %d bytes; at least %d are needed", len(req.Token), guest.MinTokenLen)
	}
	if req.Limits != nil {
		// Before the token: limits that cannot apply leave it as it was.
		if err := s.setLimits(*req.Limits); err != nil {
			return err
		}
	}
	s.setToken(req.Token)
	s.hostname.close() // a rekeyed instance is a sandbox's: no helper may come
	s.log.Info("token replaced")
	if req.Limits == nil {
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	httpio.WriteJSON(w, http.StatusOK, guest.RekeyResponse{LimitsSet: true})
	return nil
}

// handleClaim gives a den-init that waited in a warm pool to its sandbox:
// a new token, as Rekey, and a new identity, as a fresh boot. An
// instance anything ran in is refused: it is no longer as it booted.
func (s *Server) handleClaim(w http.ResponseWriter, r *http.Request) error {
	var req guest.ClaimRequest
	if err := httpio.DecodeJSON(w, r, &req); err != nil {
		return err
	}
	if len(req.Token) < guest.MinTokenLen {
		return errdefs.Invalid("token is %d bytes; at least %d are needed", len(req.Token), guest.MinTokenLen)
	}
	if n := s.seq.Load(); n > 0 {
		return errdefs.Conflict("%d processes were started in this instance: it is no longer as it booted", n)
	}
	if req.Hostname != "" {
		if err := s.hostname.await(r.Context()); err != nil {
			return err
		}
	}
	if s.cfg.SignalAll {
		// Whoever started them (runsc exec too), nothing but den-init
		// and its host name helper may live in an instance to claim.
		helper, strangers := s.hostname.helperPID(), 0
		for _, pe := range readProcTable() {
			if pe.pid != os.Getpid() && pe.pid != helper {
				strangers++
			}
		}
		if strangers > 0 {
			return errdefs.Conflict("%d processes live beside den-init: the instance is no longer as it booted", strangers)
		}
	}
	var named, gone time.Duration
	if req.Hostname != "" {
		var err error
		if named, gone, err = s.hostname.set(r.Context(), req.Hostname); err != nil {
			return err
		}
	}
	s.hostname.close()
	s.mu.Lock()
	s.info.BootID = randomID(16)
	s.info.Started = time.Now().UTC()
	s.mu.Unlock()
	s.setToken(req.Token)
	s.log.Info("claimed", "named", named, "helper_gone", gone)
	w.WriteHeader(http.StatusNoContent)
	return nil
}
