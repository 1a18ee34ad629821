package httpapi

import (
	"encoding/json"
	"math"
	"net/http"
	"strconv"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/httpapi/httpx"
	"github.com/den-dev/den/internal/runlogs"
	"github.com/den-dev/den/internal/running"
	"github.com/den-dev/den/internal/sandbox"
)

var _ RunService = (*running.Service)(nil)

// maxRunsLimit bounds ?limit= of GET .../runs.
const maxRunsLimit = 100000

// exec starts a detached run. Attached runs go through the WebSocket.
func (s *server) exec(w http.ResponseWriter, r *http.Request) error {
	var req api.ExecRequest
	if err := httpx.DecodeJSON(w, r, &req, s.maxJSONBytes); err != nil {
		return err
	}
	p, err := toExecParams(req)
	if err != nil {
		return err
	}
	p.Detach = true // nobody is attached to this request's output
	run, err := s.sandboxes.Exec(r.Context(), r.PathValue("name"), p)
	if err != nil {
		return err
	}
	return httpx.WriteJSON(w, http.StatusCreated, toRun(run))
}

func (s *server) listRuns(w http.ResponseWriter, r *http.Request) error {
	limit, err := httpx.QueryInt(r, "limit", maxRunsLimit)
	if err != nil {
		return err
	}
	var runs []*sandbox.Run
	switch status := r.URL.Query().Get("status"); status {
	case "":
		runs, err = s.runs.Runs(r.Context(), r.PathValue("name"), int(limit))
	case api.RunRunning:
		runs, err = s.runs.RunningRuns(r.Context(), r.PathValue("name"))
		if limit > 0 && int64(len(runs)) > limit {
			runs = runs[:limit]
		}
	default:
		return httpx.InvalidQuery("status", status, "only running is a status to list by")
	}
	if err != nil {
		return err
	}
	return httpx.WriteJSON(w, http.StatusOK, api.RunList{Runs: mapSlice(runs, toRun)})
}

func (s *server) getRun(w http.ResponseWriter, r *http.Request) error {
	run, err := s.runs.Run(r.Context(), r.PathValue("name"), r.PathValue("run"))
	if err != nil {
		return err
	}
	return httpx.WriteJSON(w, http.StatusOK, toRun(run))
}

// runLogs streams one output stream of a run from a byte offset. The
// header Den-Log-Offset says at which offset the body starts, so a client
// that counts the bytes it got knows where to resume.
func (s *server) runLogs(w http.ResponseWriter, r *http.Request) error {
	stream, err := httpx.QueryStream(r)
	if err != nil {
		return err
	}
	from, err := httpx.QueryInt(r, "from", math.MaxInt64)
	if err != nil {
		return err
	}
	follow, err := httpx.QueryBool(r, "follow")
	if err != nil {
		return err
	}
	how := runlogs.FollowNo
	if follow {
		how = runlogs.FollowWake
		if wake, err := httpx.QueryBoolDefault(r, "wake", true); err != nil {
			return err
		} else if !wake {
			how = runlogs.FollowWait
		}
	}
	ref, runID := r.PathValue("name"), r.PathValue("run")
	// An unknown run gets its 404 here, before a followed stream's 200
	// goes out.
	if _, err := s.runs.Run(r.Context(), ref, runID); err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Den-Log-Offset", strconv.FormatInt(from, 10))
	fw := newFlushWriter(w)
	if !follow {
		return s.logs.Logs(r.Context(), ref, runID, stream, from, how, fw)
	}
	// A followed stream says how it ended in a trailer: "ended" once the
	// run ended and all of its output was sent, else why it stopped. A
	// stream without one was cut: the client knows to resume, not that
	// the run is done.
	w.Header().Set("Trailer", api.LogEndTrailer)
	// A silent command must not leave the client waiting for headers.
	if err := fw.Flush(); err != nil {
		return err
	}
	end := api.LogEnded
	if err := s.logs.Logs(r.Context(), ref, runID, stream, from, how, fw); err != nil {
		if r.Context().Err() != nil {
			return nil // the client left
		}
		_, body := httpx.APIError(s.log, r, err)
		b, _ := json.Marshal(body)
		end = string(b)
	}
	w.Header().Set(api.LogEndTrailer, end)
	return nil
}

// runStdin streams the body into a run's standard input: a detached run
// started with stdin, or an attached one whose client sends none itself.
// With close=false stdin stays open for more; an empty body with close
// (the default) just closes it.
func (s *server) runStdin(w http.ResponseWriter, r *http.Request) error {
	closeIt, err := httpx.QueryBoolDefault(r, "close", true)
	if err != nil {
		return err
	}
	if err := s.runs.Stdin(r.Context(), r.PathValue("name"), r.PathValue("run"), r.Body, !closeIt); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// resizeRun changes the window size of a run's terminal.
func (s *server) resizeRun(w http.ResponseWriter, r *http.Request) error {
	var req api.Resize
	if err := httpx.DecodeJSON(w, r, &req, s.maxJSONBytes); err != nil {
		return err
	}
	if err := s.runs.Resize(r.Context(), r.PathValue("name"), r.PathValue("run"), req.Rows, req.Cols); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *server) signalRun(w http.ResponseWriter, r *http.Request) error {
	var req api.SignalRequest
	if err := httpx.DecodeJSON(w, r, &req, s.maxJSONBytes); err != nil {
		return err
	}
	if req.Signal == "" {
		return errdefs.WithHint(errdefs.Invalid("no signal given"), `set "signal", e.g. "TERM", "KILL" or "9"`)
	}
	if err := s.runs.Signal(r.Context(), r.PathValue("name"), r.PathValue("run"), req.Signal); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
