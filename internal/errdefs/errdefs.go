// Package errdefs defines den's few error classes. Every layer wraps errors
// with what it was doing; the class is set once, where the failure is first
// understood, and translated to a status code once, at the API edge.
package errdefs

import (
	"errors"
	"fmt"
)

// The classes. Check them with errors.Is.
var (
	ErrInvalid     = errors.New("invalid argument")
	ErrNotFound    = errors.New("not found")
	ErrConflict    = errors.New("conflict")
	ErrTooLarge    = errors.New("too large")
	ErrUnavailable = errors.New("unavailable")
	// ErrQuota is a refusal because an owner's quota has no room for
	// what was asked: the message names the quota, its use and limit.
	ErrQuota = errors.New("quota exceeded")
)

// classified is an error with a class, a message and an optional hint.
// Its text is the message alone: the class is for code, not for people.
type classified struct {
	class error
	msg   string
	hint  string
}

func (e *classified) Error() string        { return e.msg }
func (e *classified) Is(target error) bool { return target == e.class }

// New returns an error of class with a message built from format.
func New(class error, format string, a ...any) error {
	return &classified{class: class, msg: fmt.Sprintf(format, a...)}
}

// Invalid, NotFound, Conflict, TooLarge, Unavailable and Quota are shorthands for New.
func Invalid(format string, a ...any) error     { return New(ErrInvalid, format, a...) }
func NotFound(format string, a ...any) error    { return New(ErrNotFound, format, a...) }
func Conflict(format string, a ...any) error    { return New(ErrConflict, format, a...) }
func TooLarge(format string, a ...any) error    { return New(ErrTooLarge, format, a...) }
func Unavailable(format string, a ...any) error { return New(ErrUnavailable, format, a...) }
func Quota(format string, a ...any) error       { return New(ErrQuota, format, a...) }

// WithHint attaches a hint (how to fix it) to err, keeping its class.
func WithHint(err error, hint string) error {
	if err == nil {
		return nil
	}
	return &hinted{err: err, hint: hint}
}

type hinted struct {
	err  error
	hint string
}

func (h *hinted) Error() string { return h.err.Error() }
func (h *hinted) Unwrap() error { return h.err }

// Hint returns the outermost hint attached to err, or "".
func Hint(err error) string {
	var h *hinted
	if errors.As(err, &h) {
		return h.hint
	}
	return ""
}

// Class returns which class err belongs to, or nil when it has none (a bug
// or a host failure: internal).
func Class(err error) error {
	for _, c := range []error{ErrInvalid, ErrNotFound, ErrConflict, ErrTooLarge, ErrUnavailable, ErrQuota} {
		if errors.Is(err, c) {
			return c
		}
	}
	return nil
}
