package e2b

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"connectrpc.com/connect"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

// den's errors leave this door in E2B's shapes: {code, message} with the
// HTTP status as the code on the control plane and /files, a Connect
// error on the RPCs. The message is den's, with its hint, so a caller (or
// a model) learns what to change. The two tables below are the only
// places den's error classes are translated.

// errorBody is every error answer of the control plane and of /files.
// The SDK branches on code, not on the status.
type errorBody struct {
	Code      int    `json:"code"`
	Message   string `json:"message"`
	SandboxID string `json:"sandboxId,omitempty"`
}

// connectByCode maps den's error codes to Connect's. The SDK turns
// invalid_argument into InvalidArgumentError, unauthenticated into
// AuthenticationError, not_found into NotFoundError (FileNotFoundError
// for files), unavailable into TimeoutError.
var connectByCode = map[string]connect.Code{
	api.CodeInvalid:       connect.CodeInvalidArgument,
	api.CodeUnauthorized:  connect.CodeUnauthenticated,
	api.CodeForbidden:     connect.CodePermissionDenied,
	api.CodeNotFound:      connect.CodeNotFound,
	api.CodeConflict:      connect.CodeFailedPrecondition,
	api.CodeTooLarge:      connect.CodeInvalidArgument,
	api.CodeQuotaExceeded: connect.CodePermissionDenied,
	api.CodeUnavailable:   connect.CodeUnavailable,
	api.CodeInternal:      connect.CodeInternal,
}

// errNoKey is a request without a den token.
var errNoKey = &client.Error{API: &api.Error{
	Code:    api.CodeUnauthorized,
	Message: "no API key: E2B's SDK sends E2B_API_KEY as X-API-KEY, and the envd access token as X-Access-Token",
	Hint:    "set E2B_API_KEY to a den token (an admin makes one with `den token create NAME --scope owner`)",
}}

// wireError is den's class, message and hint of err. Errors that are not
// den's (a bug in this door, a broken connection to the API) are internal.
func wireError(err error) *api.Error {
	var ce *client.Error
	if errors.As(err, &ce) && ce.API != nil {
		return ce.API
	}
	var ae *api.Error
	if errors.As(err, &ae) {
		return ae
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return &api.Error{Code: api.CodeUnavailable, Message: err.Error()}
	}
	return &api.Error{Code: api.CodeInternal, Message: "internal error: " + err.Error()}
}

// message is what a caller is told: den's message and, on its own line,
// its hint.
func message(e *api.Error) string {
	if e.Hint == "" {
		return e.Message
	}
	return e.Message + "\nhint: " + e.Hint
}

// isUnknownUser reports whether e is den-init refusing a user the sandbox
// does not have, which E2B answers as an authentication failure.
func isUnknownUser(e *api.Error) bool {
	return e.Code == api.CodeInvalid && strings.Contains(e.Message, "no user \"")
}

// isPermissionDenied reports whether e is den-init refusing a file call
// the user it acts as may not make, which envd answers 403 on /files and
// permission_denied to an RPC.
func isPermissionDenied(e *api.Error) bool {
	return e.Code == api.CodeInvalid && strings.HasSuffix(e.Message, ": permission denied")
}

// isNoSpace reports whether e is a sandbox out of disk space, which E2B
// answers 507.
func isNoSpace(e *api.Error) bool {
	return e.Code == api.CodeUnavailable && strings.Contains(e.Message, "no space left")
}

// httpStatus is the status of err as E2B's REST planes answer it.
func httpStatus(e *api.Error) int {
	switch {
	case isUnknownUser(e):
		return http.StatusUnauthorized
	case isPermissionDenied(e):
		return http.StatusForbidden
	case isNoSpace(e):
		return http.StatusInsufficientStorage
	}
	if s := api.StatusOf(e.Code); s != 0 {
		return s
	}
	return http.StatusInternalServerError
}

// writeError answers err as {code, message}.
func (d *Door) writeError(w http.ResponseWriter, r *http.Request, err error) {
	e := wireError(err)
	status := httpStatus(e)
	if status >= 500 && status != http.StatusServiceUnavailable && status != http.StatusInsufficientStorage {
		d.log.Error("e2b request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	writeJSON(w, status, errorBody{Code: status, Message: message(e)})
}

// writeNotFound answers what E2B's proxy answers for a sandbox that is
// unknown, killed or paused: 502, which the SDK reads as "not running".
func writeNotFound(w http.ResponseWriter, sandboxID string) {
	writeJSON(w, http.StatusBadGateway, errorBody{Code: http.StatusBadGateway,
		Message: "The sandbox was not found", SandboxID: sandboxID})
}

// invalid is a request this door refuses before asking den.
func invalid(format string, args ...any) error {
	return &client.Error{API: &api.Error{Code: api.CodeInvalid, Message: fmt.Sprintf(format, args...)}}
}

// invalidHint is invalid with a hint.
func invalidHint(hint, format string, args ...any) error {
	return &client.Error{API: &api.Error{Code: api.CodeInvalid, Message: fmt.Sprintf(format, args...), Hint: hint}}
}

// rpcError turns err into a Connect error.
func rpcError(err error) error {
	var cerr *connect.Error
	if errors.As(err, &cerr) {
		return cerr
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return connect.NewError(connect.CodeDeadlineExceeded, err)
	}
	if errors.Is(err, context.Canceled) {
		return connect.NewError(connect.CodeCanceled, err)
	}
	e := wireError(err)
	code, ok := connectByCode[e.Code]
	switch {
	case isUnknownUser(e):
		code = connect.CodeUnauthenticated
	case isPermissionDenied(e):
		code = connect.CodePermissionDenied
	case !ok:
		code = connect.CodeInternal
	}
	return connect.NewError(code, errors.New(message(e)))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
