package api

import (
	"encoding/json"
	"time"
)

// Idempotency headers. A mutating request (POST, PUT, PATCH, DELETE) may
// carry IdempotencyKeyHeader: 1 to MaxIdempotencyKey printable ASCII
// characters, fresh for each request. dend then runs it at most once and
// answers a repeat of the key from what it recorded, saying so in
// IdempotencyStatusHeader. GET /v1/requests/{key} tells what became of it.
const (
	IdempotencyKeyHeader = "Idempotency-Key"
	// IdempotencyStatusHeader is set on answers that did not come from
	// running the request: "replayed" (the recorded answer of a request
	// that was done), "in-progress" (409: it still runs), "interrupted"
	// (409: dend stopped while it ran).
	IdempotencyStatusHeader = "Idempotency-Status"
	// MaxIdempotencyKey is the longest key accepted.
	MaxIdempotencyKey = 128
)

// Values of IdempotencyStatusHeader.
const (
	IdempotencyReplayed    = "replayed"
	IdempotencyInProgress  = "in-progress"
	IdempotencyInterrupted = "interrupted"
	// IdempotencyNotKept: it was done, but its answer was not kept (a
	// secret, or too large); the 409 says so and how to see the result.
	IdempotencyNotKept = "not-kept"
)

// States of a request, in RequestStatus.State.
const (
	RequestDone        = "done"
	RequestInProgress  = "in_progress"
	RequestInterrupted = "interrupted" // dend stopped while it ran: it may or may not have taken effect
)

// RequestStatus is what became of a request sent with an idempotency key
// (GET /v1/requests/{key}).
type RequestStatus struct {
	Key   string `json:"key"`
	State string `json:"state"`
	// Method and Path are what was asked.
	Method    string     `json:"method"`
	Path      string     `json:"path"`
	StartedAt time.Time  `json:"started_at"`
	EndedAt   *time.Time `json:"ended_at,omitempty"`
	// Status is the HTTP status it was answered with, once done, and
	// Response the answer's body when it was JSON and small enough to
	// keep; Error is the error it was answered with, if any.
	Status   int             `json:"status,omitempty"`
	Response json.RawMessage `json:"response,omitempty"`
	Error    *Error          `json:"error,omitempty"`
	// Sandbox is the sandbox the request was about, as named in its
	// path, when it was about one.
	Sandbox string `json:"sandbox,omitempty"`
	// Hint says what to do next: for an interrupted request, what to
	// check to learn whether it took effect.
	Hint string `json:"hint,omitempty"`
}
