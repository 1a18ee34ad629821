package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/den-dev/den/api"
)

// Error classes. Every *Error matches exactly one of them with errors.Is,
// by its code; an internal error matches none.
var (
	ErrInvalid      = errors.New("invalid request")
	ErrUnauthorized = errors.New("unauthorized")
	ErrForbidden    = errors.New("forbidden")
	ErrNotFound     = errors.New("not found")
	ErrConflict     = errors.New("conflict")
	ErrTooLarge     = errors.New("too large")
	ErrUnavailable  = errors.New("unavailable")
	// ErrQuota: the owner's quota has no room for what was asked.
	ErrQuota = errors.New("quota exceeded")
	// ErrOutcomeUnknown: the connection to dend dropped while a request
	// that changes something was under way, and dend could not tell
	// whether it took effect (it stopped mid-way, or never came back).
	// The error's hint says what to check; RequestKey gives the request's
	// idempotency key for GET /v1/requests/{key}. It matches along with
	// its code's class.
	ErrOutcomeUnknown = errors.New("outcome unknown")
)

var classByCode = map[string]error{
	api.CodeInvalid:       ErrInvalid,
	api.CodeUnauthorized:  ErrUnauthorized,
	api.CodeForbidden:     ErrForbidden,
	api.CodeNotFound:      ErrNotFound,
	api.CodeConflict:      ErrConflict,
	api.CodeTooLarge:      ErrTooLarge,
	api.CodeUnavailable:   ErrUnavailable,
	api.CodeQuotaExceeded: ErrQuota,
}

var codeByStatus = map[int]string{
	http.StatusBadRequest:            api.CodeInvalid,
	http.StatusUnauthorized:          api.CodeUnauthorized,
	http.StatusForbidden:             api.CodeForbidden,
	http.StatusNotFound:              api.CodeNotFound,
	http.StatusMethodNotAllowed:      api.CodeInvalid,
	http.StatusConflict:              api.CodeConflict,
	http.StatusRequestEntityTooLarge: api.CodeTooLarge,
	http.StatusServiceUnavailable:    api.CodeUnavailable,
	http.StatusBadGateway:            api.CodeUnavailable,
	http.StatusGatewayTimeout:        api.CodeUnavailable,
}

// Error is an error reported by dend, or a failure to reach it. It wraps
// the wire error (errors.As with *api.Error works) and adds the HTTP
// status. StatusCode is 0 when dend could not be reached at all, and for
// errors that arrived in-band (an exec stream's error frame or the last
// line of an image progress stream), in which case it is derived from the
// code.
//
// Its text is the message alone; the hint, a suggestion for how to fix it,
// is in Hint (see also the Hint function).
type Error struct {
	StatusCode int
	API        *api.Error
	err        error // the transport error, for connection failures
	// After a lost connection (retry.go): the request's idempotency
	// key, and whether its outcome is unknown.
	key     string
	unknown bool
}

// Code is the wire error code, one of the api.Code constants.
func (e *Error) Code() string { return e.API.Code }

// Message is the human message without the hint.
func (e *Error) Message() string { return e.API.Message }

// Hint is how to fix it, or "".
func (e *Error) Hint() string { return e.API.Hint }

func (e *Error) Error() string { return e.API.Message }

// Unwrap returns the wire error and, for connection failures, the
// transport error.
func (e *Error) Unwrap() []error {
	if e.err != nil {
		return []error{e.API, e.err}
	}
	return []error{e.API}
}

// Is reports whether target is the class of e (ErrNotFound and so on).
func (e *Error) Is(target error) bool {
	switch target {
	case ErrOutcomeUnknown:
		return e.unknown
	case ErrUnknownCall:
		return e.unknownCall()
	}
	c, ok := classByCode[e.API.Code]
	return ok && c == target
}

// Hint returns the hint of the first *Error in err's chain, or "".
func Hint(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Hint()
	}
	return ""
}

// RequestKey returns the idempotency key of the request err is about,
// when err came of a lost connection, else "". GET /v1/requests/{key}
// (Client.Request) tells what became of that request.
func RequestKey(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.key
	}
	return ""
}

// IsOutcomeUnknown reports whether err says a request that changes
// something may or may not have taken effect: check before trying again.
func IsOutcomeUnknown(err error) bool { return errors.Is(err, ErrOutcomeUnknown) }

// IsNotFound reports whether err says the sandbox, run, image or file does
// not exist.
func IsNotFound(err error) bool { return errors.Is(err, ErrNotFound) }

// IsConflict reports whether err says the name is taken or the sandbox is in
// the wrong state.
func IsConflict(err error) bool { return errors.Is(err, ErrConflict) }

// IsInvalid reports whether err says the request was malformed.
func IsInvalid(err error) bool { return errors.Is(err, ErrInvalid) }

// IsUnavailable reports whether err says dend, or the sandbox, cannot serve
// the request right now, including when dend cannot be reached.
func IsUnavailable(err error) bool { return errors.Is(err, ErrUnavailable) }

// IsUnauthorized reports whether err says the token is missing, wrong,
// expired or revoked.
func IsUnauthorized(err error) bool { return errors.Is(err, ErrUnauthorized) }

// IsForbidden reports whether err says the token's scope does not allow
// the call.
func IsForbidden(err error) bool { return errors.Is(err, ErrForbidden) }

// IsQuota reports whether err says the owner's quota has no room for
// what was asked.
func IsQuota(err error) bool { return errors.Is(err, ErrQuota) }

// fromAPI wraps an in-band wire error.
func fromAPI(e *api.Error) *Error {
	if e == nil {
		e = &api.Error{Code: api.CodeInternal, Message: "dend reported an error without details"}
	}
	if e.Code == "" {
		e.Code = api.CodeInternal
	}
	return &Error{StatusCode: api.StatusOf(e.Code), API: e}
}

// maxErrorBody bounds how much of an error response is read.
const maxErrorBody = 64 << 10

// decodeError turns a non-2xx response into an *Error. It reads (part of)
// the body but does not close it.
func decodeError(resp *http.Response) *Error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	var env api.ErrorBody
	if err := json.Unmarshal(body, &env); err == nil && env.Error != nil && env.Error.Message != "" {
		if env.Error.Code == "" {
			env.Error.Code = codeForStatus(resp.StatusCode)
		}
		return &Error{StatusCode: resp.StatusCode, API: env.Error}
	}
	// Not one of dend's error bodies: a proxy, or something else entirely.
	msg := fmt.Sprintf("%s (HTTP %d)", strings.ToLower(http.StatusText(resp.StatusCode)), resp.StatusCode)
	if text := strings.TrimSpace(string(body)); text != "" && len(text) < 200 && !strings.ContainsAny(text, "<{") {
		msg += ": " + text
	}
	e := &api.Error{Code: codeForStatus(resp.StatusCode), Message: msg}
	if resp.StatusCode == http.StatusUnauthorized {
		e.Hint = "set DEN_TOKEN to the token dend was started with"
	}
	return &Error{StatusCode: resp.StatusCode, API: e}
}

func codeForStatus(status int) string {
	if c, ok := codeByStatus[status]; ok {
		return c
	}
	return api.CodeInternal
}

// connError reports that dend could not be reached at all.
func (c *Client) connError(err error) *Error {
	e := &api.Error{Code: api.CodeUnavailable}
	if c.socket != "" {
		e.Message = fmt.Sprintf("cannot connect to dend at %s: %s", c.socket, rootCause(err))
		e.Hint = "is dend running? start it with `make run`, or point --socket/DEN_SOCKET at its socket"
		if errors.Is(err, os.ErrPermission) {
			e.Hint = "the socket is only for root: run den as root (e.g. with sudo)"
		}
	} else {
		e.Message = fmt.Sprintf("cannot connect to dend at %s: %s", c.base.Host, rootCause(err))
		e.Hint = "is dend listening there? check DEN_HOST, or use the local socket"
	}
	return &Error{API: e, err: err}
}

// lostReading reports a connection that dropped during a request that
// changes nothing: sending it again is safe.
func (c *Client) lostReading(r request, err error) *Error {
	where := c.base.Host
	if c.socket != "" {
		where = c.socket
	}
	return &Error{API: &api.Error{Code: api.CodeUnavailable,
		Message: fmt.Sprintf("lost the connection to dend at %s during %s %s (%s)", where, r.method, r.path, rootCause(err)),
		Hint:    "dend may have restarted: try again (this changed nothing); if it keeps failing, check that dend is running",
	}, err: err}
}

// rootCause strips the layers net/http and net add ("Get ...: dial unix
// ...: connect: ") down to the system's words, e.g. "connection refused".
func rootCause(err error) string {
	for {
		u := errors.Unwrap(err)
		if u == nil {
			return err.Error()
		}
		err = u
	}
}
