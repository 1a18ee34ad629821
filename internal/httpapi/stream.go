package httpapi

import "net/http"

// flushWriter writes to an HTTP response and flushes after every write, so
// a client reading a stream gets the bytes as they come rather than when a
// buffer fills.
type flushWriter struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

func newFlushWriter(w http.ResponseWriter) *flushWriter {
	return &flushWriter{w: w, rc: http.NewResponseController(w)}
}

func (f *flushWriter) Write(p []byte) (int, error) {
	n, err := f.w.Write(p)
	if err != nil {
		return n, err
	}
	return n, f.rc.Flush()
}

// Flush sends the status line and headers, and whatever is buffered.
func (f *flushWriter) Flush() error { return f.rc.Flush() }
