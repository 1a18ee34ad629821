package sshgate

import (
	"errors"
	"net/http"

	"github.com/pkg/sftp"

	"github.com/den-dev/den/internal/auth"
	"github.com/den-dev/den/internal/errdefs"
)

// The one table of this door: den's error classes in SSH's terms. A
// command that cannot start is told on stderr, with its hint, and exits
// 255 as ssh does when it fails itself; SFTP gets its status codes; the
// audit log gets the HTTP status the API would have answered.

// exitFailed is the exit status of a command den could not run.
const exitFailed = 255

// statusOf is the HTTP status the API answers err with, for the audit.
func statusOf(err error) int {
	switch {
	case err == nil:
		return http.StatusOK
	case errors.Is(err, auth.ErrUnauthorized):
		return http.StatusUnauthorized
	case errors.Is(err, auth.ErrForbidden):
		return http.StatusForbidden
	case errors.Is(err, errdefs.ErrInvalid):
		return http.StatusBadRequest
	case errors.Is(err, errdefs.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, errdefs.ErrConflict):
		return http.StatusConflict
	case errors.Is(err, errdefs.ErrTooLarge):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, errdefs.ErrQuota):
		return http.StatusTooManyRequests
	case errors.Is(err, errdefs.ErrUnavailable):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// message is err as a user reads it: the message, then the hint.
func message(err error) string {
	msg := "den: " + err.Error()
	if h := errdefs.Hint(err); h != "" {
		msg += "\nhint: " + h
	}
	return msg + "\n"
}

// refusal is a login refused for why, for the audit.
func refusal(why string) error { return auth.Forbidden("login refused: %s", why) }

// sftpError turns err into what pkg/sftp sends the client: not found and
// permission as their SFTP status codes, the rest as a failure with den's
// message.
func sftpError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, errdefs.ErrNotFound):
		return &fxError{err: err, code: sftp.ErrSSHFxNoSuchFile}
	case errors.Is(err, auth.ErrForbidden):
		return &fxError{err: err, code: sftp.ErrSSHFxPermissionDenied}
	}
	return err
}

// fxError carries den's message with an SFTP status code: pkg/sftp sends
// the code it finds in the error's chain, and the error's message.
type fxError struct {
	err  error
	code error
}

func (e *fxError) Error() string   { return e.err.Error() }
func (e *fxError) Unwrap() []error { return []error{e.err, e.code} }
