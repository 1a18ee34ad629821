package httpx

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/internal/errdefs"
)

// DecodeJSON reads the request body as exactly one JSON value into v:
// at most limit bytes, no unknown fields, nothing after the value.
func DecodeJSON(w http.ResponseWriter, r *http.Request, v any, limit int64) error {
	return DecodeMessage(http.MaxBytesReader(w, r.Body, limit), v, limit)
}

// DecodeOptionalJSON is DecodeJSON for routes whose body fields are all
// optional: an empty body counts as {}.
func DecodeOptionalJSON(w http.ResponseWriter, r *http.Request, v any, limit int64) error {
	body := http.MaxBytesReader(w, r.Body, limit)
	switch err := decodeStrict(body, v); {
	case errors.Is(err, io.EOF):
		return nil
	case err != nil:
		return jsonBodyError(err, limit)
	}
	return nil
}

// DecodeMessage reads exactly one JSON value from rd into v, as
// DecodeJSON does a body; limit is only named in the error of a reader
// that went over it.
func DecodeMessage(rd io.Reader, v any, limit int64) error {
	if err := decodeStrict(rd, v); err != nil {
		return jsonBodyError(err, limit)
	}
	return nil
}

// errTrailingData is decodeStrict's complaint about a second value.
var errTrailingData = errors.New("unexpected data after the JSON value")

// decodeStrict decodes exactly one JSON value from r into v, refusing
// unknown fields. Its errors are encoding/json's, for jsonBodyError.
func decodeStrict(r io.Reader, v any) error {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	var extra json.RawMessage
	switch err := dec.Decode(&extra); err {
	case io.EOF:
		return nil
	case nil:
		return errTrailingData
	default:
		return err
	}
}

// jsonBodyError classifies a failure to decode a JSON body, saying what was
// wrong in the words of encoding/json.
func jsonBodyError(err error, limit int64) error {
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return errdefs.WithHint(errdefs.TooLarge("JSON body is over the %d byte limit", limit),
			"send a smaller request; file contents go through PUT .../files/content instead")
	case errors.Is(err, io.EOF):
		return errdefs.WithHint(errdefs.Invalid("invalid JSON body: the body is empty"), "send a JSON object")
	case errors.Is(err, errTrailingData):
		return errdefs.WithHint(errdefs.Invalid("invalid JSON body: %v", err), "send exactly one JSON object")
	}
	msg := strings.TrimPrefix(err.Error(), "json: ")
	return errdefs.WithHint(errdefs.Invalid("invalid JSON body: %s", msg),
		"see GET /v1/openapi.yaml for the fields this route takes")
}

// QueryBool reads an optional boolean query parameter; absent is false.
func QueryBool(r *http.Request, name string) (bool, error) {
	return QueryBoolDefault(r, name, false)
}

// QueryBoolDefault reads an optional boolean query parameter; absent is
// def.
func QueryBoolDefault(r *http.Request, name string, def bool) (bool, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, InvalidQuery(name, v, "use true or false")
	}
	return b, nil
}

// QueryInt reads an optional non-negative integer query parameter; absent is 0.
func QueryInt(r *http.Request, name string, upper int64) (int64, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 || n > upper {
		return 0, InvalidQuery(name, v, fmt.Sprintf("use a whole number from 0 to %d", upper))
	}
	return n, nil
}

// QueryMode reads an optional permission mode in octal ("0644" or "644");
// absent gives def.
func QueryMode(r *http.Request, name string, def uint32) (uint32, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	m, err := strconv.ParseUint(strings.TrimPrefix(v, "0o"), 8, 32)
	if err != nil || m > 0o7777 {
		return 0, InvalidQuery(name, v, "use octal permission bits such as 0644 or 755")
	}
	return uint32(m), nil
}

// QueryStream reads the log stream to read: stdout (the default) or stderr.
func QueryStream(r *http.Request) (string, error) {
	switch v := r.URL.Query().Get("stream"); v {
	case "", api.StreamStdout:
		return api.StreamStdout, nil
	case api.StreamStderr:
		return v, nil
	default:
		return "", InvalidQuery("stream", v, "use stdout or stderr")
	}
}

// InvalidQuery refuses the value of query parameter name, with hint.
func InvalidQuery(name, value, hint string) error {
	return errdefs.WithHint(errdefs.Invalid("invalid query parameter %s=%q", name, value), hint)
}
