// Package httpio is the HTTP plumbing den-init's handlers share: JSON
// answers, JSON request bodies of bounded size, and request bodies whose
// read failures (the host went away) are told apart from other failures.
//
// It knows no route and keeps no state; it never writes an error answer
// (internal/initd maps errors to the guest protocol's error shape).
package httpio

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/guest"
)

// WriteJSON answers with status and v as JSON.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// DecodeJSON reads a JSON request body of at most guest.MaxJSONBody bytes.
func DecodeJSON(w http.ResponseWriter, r *http.Request, v any) error {
	body := http.MaxBytesReader(w, r.Body, guest.MaxJSONBody)
	err := json.NewDecoder(body).Decode(v)
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return errdefs.TooLarge("request body is over the %d byte limit", guest.MaxJSONBody)
	case errors.Is(err, io.EOF):
		return errdefs.Invalid("empty request body: JSON expected")
	case err != nil:
		return errdefs.Invalid("malformed JSON body: %v", err)
	}
	return nil
}

// ReadError tells a failure to read the request body (the host went
// away) from a failure to write it.
type ReadError struct{ Err error }

func (e *ReadError) Error() string { return fmt.Sprintf("reading the request body: %v", e.Err) }
func (e *ReadError) Unwrap() error { return e.Err }

// Body marks errors of r as ReadErrors.
func Body(r io.Reader) io.Reader { return bodyReader{r} }

type bodyReader struct{ r io.Reader }

func (b bodyReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil && err != io.EOF {
		err = &ReadError{err}
	}
	return n, err
}
