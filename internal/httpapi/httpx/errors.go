package httpx

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/internal/auth"
	"github.com/den-dev/den/internal/errdefs"
)

// InternalMessage is all a client learns of an unclassified error: its text
// may name host paths or internals, so it goes to dend's log instead.
const InternalMessage = "internal error; see dend's log"

// ToAPIError is the one translation of an error to what the client sees:
// the HTTP status and the body. It reports whether err was internal (no
// class), so the caller logs it.
func ToAPIError(err error) (status int, body *api.Error, internal bool) {
	var code string
	switch class := errdefs.Class(err); {
	case errors.Is(err, auth.ErrUnauthorized):
		status, code = http.StatusUnauthorized, api.CodeUnauthorized
	case errors.Is(err, auth.ErrForbidden):
		status, code = http.StatusForbidden, api.CodeForbidden
	case class == errdefs.ErrInvalid:
		status, code = http.StatusBadRequest, api.CodeInvalid
	case class == errdefs.ErrNotFound:
		status, code = http.StatusNotFound, api.CodeNotFound
	case class == errdefs.ErrConflict:
		status, code = http.StatusConflict, api.CodeConflict
	case class == errdefs.ErrTooLarge:
		status, code = http.StatusRequestEntityTooLarge, api.CodeTooLarge
	case class == errdefs.ErrUnavailable:
		status, code = http.StatusServiceUnavailable, api.CodeUnavailable
	case class == errdefs.ErrQuota:
		// Forbidden, not a conflict: retrying changes nothing until the
		// owner frees some or an admin raises its quota.
		status, code = http.StatusForbidden, api.CodeQuotaExceeded
	default:
		return http.StatusInternalServerError, &api.Error{Code: api.CodeInternal, Message: InternalMessage}, true
	}
	return status, &api.Error{Code: code, Message: err.Error(), Hint: errdefs.Hint(err)}, false
}

// NotEnabled is the answer of a route whose service this dend does not
// run; what is plural ("API tokens").
func NotEnabled(what string) error {
	return errdefs.Unavailable("%s are not enabled on this dend", what)
}

// APIError translates err for a client, logging it to log first when it
// is internal: the one place such errors are logged.
func APIError(log *slog.Logger, r *http.Request, err error) (int, *api.Error) {
	status, body, internal := ToAPIError(err)
	if internal {
		log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	NoteError(r, body.Message)
	return status, body
}

// WriteError answers with err as the JSON envelope.
func WriteError(log *slog.Logger, w http.ResponseWriter, r *http.Request, err error) {
	status, body := APIError(log, r, err)
	WriteJSONError(w, status, body)
}

// WriteJSONError answers with e as the JSON envelope.
func WriteJSONError(w http.ResponseWriter, status int, e *api.Error) {
	_ = WriteJSON(w, status, api.ErrorBody{Error: e})
}

// WriteJSON answers with v as JSON.
func WriteJSON(w http.ResponseWriter, status int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, err = w.Write(append(b, '\n'))
	return err
}
