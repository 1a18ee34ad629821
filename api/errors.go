package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// Error codes. Every error the API returns carries one of these, and the
// HTTP status that goes with it.
const (
	CodeInvalid      = "invalid"      // 400: the request is malformed or a value is out of range
	CodeUnauthorized = "unauthorized" // 401: missing or wrong token
	CodeNotFound     = "not_found"    // 404: no such sandbox, checkpoint, run, image or file
	CodeConflict     = "conflict"     // 409: the name is taken, or the sandbox is in the wrong state
	CodeTooLarge     = "too_large"    // 413: the body is over the limit
	CodeUnavailable  = "unavailable"  // 503: den or the sandbox cannot serve this right now
	CodeInternal     = "internal"     // 500: a bug or a host failure; see dend's log
	// CodeQuotaExceeded (403): the owner's quota has no room for it; the
	// message names the quota, its use and limit.
	CodeQuotaExceeded = "quota_exceeded"
)

// StatusOf is the HTTP status that goes with an error code; 0 for a code
// this version does not know.
func StatusOf(code string) int { return statusByCode[code] }

var statusByCode = map[string]int{
	CodeInvalid:       http.StatusBadRequest,
	CodeUnauthorized:  http.StatusUnauthorized,
	CodeForbidden:     http.StatusForbidden,
	CodeNotFound:      http.StatusNotFound,
	CodeConflict:      http.StatusConflict,
	CodeTooLarge:      http.StatusRequestEntityTooLarge,
	CodeUnavailable:   http.StatusServiceUnavailable,
	CodeInternal:      http.StatusInternalServerError,
	CodeQuotaExceeded: http.StatusForbidden,
}

// Error is the body of every non-2xx response: {"error": {...}}.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Hint    string `json:"hint,omitempty"` // how to fix it
}

func (e *Error) Error() string {
	if e.Hint != "" {
		return fmt.Sprintf("%s (hint: %s)", e.Message, e.Hint)
	}
	return e.Message
}

// What dend answers a call it does not have, as every release has
// answered it: 404 with a message beginning NoRouteMessage when nothing
// is served at the path, 405 with one beginning NoMethodMessage when the
// path is served for other methods. A client newer than dend meets them
// for the calls added since dend's release.
const (
	NoRouteMessage  = "no route "
	NoMethodMessage = "method "
)

// ErrorBody is the envelope of an error response.
type ErrorBody struct {
	Error *Error `json:"error"`
}

// Duration is a time.Duration that travels as a Go duration string
// ("30s", "1m30s") and also accepts a number of seconds.
type Duration time.Duration

// MarshalJSON implements json.Marshaler.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON implements json.Unmarshaler.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("invalid duration %q: use a form like 30s or 5m", s)
		}
		*d = Duration(v)
		return nil
	}
	var secs float64
	if err := json.Unmarshal(b, &secs); err != nil {
		return fmt.Errorf("invalid duration %s: use a string like \"30s\" or a number of seconds", b)
	}
	*d = Duration(secs * float64(time.Second))
	return nil
}
