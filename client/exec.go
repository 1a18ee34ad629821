package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/coder/websocket"

	"github.com/den-dev/den/api"
)

// ExecIO connects an attached command to the caller.
type ExecIO struct {
	// Stdin, when set, is sent to the command, followed by end-of-file
	// when it returns io.EOF. Exec does not wait for a Read in progress
	// when the command ends (it cannot interrupt it), so a Stdin like
	// os.Stdin may still be read once after Exec returns.
	Stdin io.Reader
	// Stdout and Stderr receive the command's output as it comes; nil
	// discards it. With a TTY, everything arrives on Stdout.
	Stdout, Stderr io.Writer
	// Resize, when set, carries new terminal sizes to a TTY command.
	Resize <-chan api.Resize
	// Signals, when set, carries signals ("INT", "TERM", "9") to the
	// command.
	Signals <-chan string
	// Started, when set, is called with the run record once the command
	// has started, before any output.
	Started func(*api.Run)
}

// maxFrameJSON bounds the JSON frames of the exec stream.
const maxFrameJSON = 1 << 20

// stdinChunk is how much of Stdin goes in one frame.
const stdinChunk = 32 << 10

// Exec runs a command in a sandbox attached: it streams the output to
// eio's writers as it comes and returns the final run record once the
// command has ended. The command's exit status is in the run (Status,
// ExitCode, Signal); Exec's error is only about running it: an error frame
// from dend (a typed *Error, e.g. not found for an unknown sandbox), a
// lost connection, or ctx ending. When ctx ends, a non-TTY command keeps
// running and stays readable through Runs and Logs; a TTY one gets SIGHUP.
func (c *Client) Exec(ctx context.Context, name string, req api.ExecRequest, eio ExecIO) (*api.Run, error) {
	if eio.Stdin != nil {
		req.Stdin = true
	}
	req.Detach = false
	first, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("encoding exec request: %w", err)
	}
	conn, err := c.dialExec(ctx, name)
	if err != nil {
		return nil, err
	}
	defer conn.CloseNow()
	conn.SetReadLimit(-1) // output frames are streamed, never held whole

	if err := conn.Write(ctx, websocket.MessageText, first); err != nil {
		return nil, c.streamError(ctx, "sending the exec request", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if req.Stdin {
		go sendStdin(ctx, conn, eio.Stdin)
	}
	if eio.Resize != nil || eio.Signals != nil {
		go sendControl(ctx, conn, eio.Resize, eio.Signals)
	}
	return c.readFrames(ctx, conn, eio)
}

func (c *Client) dialExec(ctx context.Context, name string) (*websocket.Conn, error) {
	scheme := "ws"
	if c.base.Scheme == "https" {
		scheme = "wss"
	}
	h := http.Header{}
	c.header(h)
	u := c.url(scheme, sandboxPath(name, "exec", "ws"), nil)
	conn, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPClient: c.hc, HTTPHeader: h})
	c.heard(resp)
	if err == nil {
		return conn, nil
	}
	switch {
	case ctx.Err() != nil:
		return nil, fmt.Errorf("connecting to the exec stream: %w", ctx.Err())
	case resp != nil && resp.StatusCode != http.StatusSwitchingProtocols && resp.Body != nil:
		return nil, decodeError(resp)
	case isConnError(err):
		return nil, c.connError(err)
	}
	return nil, fmt.Errorf("connecting to the exec stream: %w", err)
}

// readFrames consumes server frames until the exit or error frame.
func (c *Client) readFrames(ctx context.Context, conn *websocket.Conn, eio ExecIO) (*api.Run, error) {
	var started *api.Run
	for {
		typ, r, err := conn.Reader(ctx)
		if err != nil {
			what := "reading the exec stream"
			if started != nil {
				what += fmt.Sprintf(" of run %s", started.ID)
			}
			return nil, c.streamError(ctx, what, err)
		}
		var kind [1]byte
		if typ == websocket.MessageBinary {
			_, _ = io.ReadFull(r, kind[:]) // an empty message has kind 0: skipped
		}
		switch api.FrameKind(kind[0]) {
		case api.FrameStdout:
			err = copyOutput(eio.Stdout, r)
		case api.FrameStderr:
			err = copyOutput(eio.Stderr, r)
		case api.FrameStarted:
			var run api.Run
			if err = decodeFrame(r, &run); err == nil {
				started = &run
				if eio.Started != nil {
					eio.Started(&run)
				}
			}
		case api.FrameExit:
			var run api.Run
			if err := decodeFrame(r, &run); err != nil {
				return nil, err
			}
			return &run, nil
		case api.FrameError:
			var e api.Error
			if err := decodeFrame(r, &e); err != nil {
				return nil, err
			}
			return nil, fromAPI(&e)
		}
		if err != nil {
			return nil, err
		}
		// Skip what is left of the message (all of it for kinds this
		// client does not know), so the next one can be read.
		if _, err := io.Copy(io.Discard, r); err != nil {
			return nil, c.streamError(ctx, "reading the exec stream", err)
		}
	}
}

func copyOutput(w io.Writer, r io.Reader) error {
	if w == nil {
		w = io.Discard
	}
	if _, err := io.Copy(w, r); err != nil {
		return fmt.Errorf("writing the command's output: %w", err)
	}
	return nil
}

func decodeFrame(r io.Reader, v any) error {
	b, err := io.ReadAll(io.LimitReader(r, maxFrameJSON))
	if err != nil {
		return fmt.Errorf("reading an exec frame: %w", err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("decoding an exec frame: %w", err)
	}
	return nil
}

// streamError explains a failure of an established exec stream.
func (c *Client) streamError(ctx context.Context, what string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%s: %w", what, ctx.Err())
	}
	e := &Error{API: &api.Error{
		Code:    api.CodeUnavailable,
		Message: fmt.Sprintf("%s: the connection to dend ended before the command exited", what),
		Hint:    "a command without a TTY keeps running: see `den runs NAME` and `den logs NAME RUN`",
	}, err: err}
	if websocket.CloseStatus(err) == websocket.StatusNormalClosure || errors.Is(err, io.EOF) {
		return e
	}
	e.API.Message += " (" + err.Error() + ")"
	return e
}

// sendStdin copies r to the stream as stdin frames, then sends end-of-file.
func sendStdin(ctx context.Context, conn *websocket.Conn, r io.Reader) {
	if r != nil {
		buf := make([]byte, 1+stdinChunk)
		buf[0] = byte(api.FrameStdin)
		for {
			n, err := r.Read(buf[1:])
			if n > 0 {
				if conn.Write(ctx, websocket.MessageBinary, buf[:1+n]) != nil {
					return
				}
			}
			if err != nil {
				break // io.EOF, or a broken input: either way, no more stdin
			}
		}
	}
	_ = conn.Write(ctx, websocket.MessageBinary, []byte{byte(api.FrameStdinEOF)})
}

// sendControl forwards resizes and signals until ctx ends.
func sendControl(ctx context.Context, conn *websocket.Conn, resize <-chan api.Resize, signals <-chan string) {
	for {
		var (
			kind    api.FrameKind
			payload any
		)
		select {
		case <-ctx.Done():
			return
		case sz, ok := <-resize:
			if !ok {
				resize = nil
				continue
			}
			kind, payload = api.FrameResize, sz
		case sig, ok := <-signals:
			if !ok {
				signals = nil
				continue
			}
			kind, payload = api.FrameSignal, api.SignalRequest{Signal: sig}
		}
		b, err := json.Marshal(payload)
		if err != nil {
			continue
		}
		if conn.Write(ctx, websocket.MessageBinary, append([]byte{byte(kind)}, b...)) != nil {
			return
		}
	}
}

// ExecDetached starts a command in the background and returns its run
// record at once. Read its output with Logs and its end with GetRun;
// with req.Stdin, send it input with SendStdin.
func (c *Client) ExecDetached(ctx context.Context, name string, req api.ExecRequest) (*api.Run, error) {
	req.Detach = true
	var run api.Run
	if err := c.do(ctx, http.MethodPost, sandboxPath(name, "exec"), nil, req, &run); err != nil {
		return nil, err
	}
	return &run, nil
}

// Runs returns a sandbox's recorded commands, newest first; limit 0 lets
// dend choose how many.
func (c *Client) Runs(ctx context.Context, name string, limit int) ([]api.Run, error) {
	var q url.Values
	if limit > 0 {
		q = url.Values{"limit": {strconv.Itoa(limit)}}
	}
	var l api.RunList
	if err := c.do(ctx, http.MethodGet, sandboxPath(name, "runs"), q, nil, &l); err != nil {
		return nil, err
	}
	return l.Runs, nil
}

// RunningRuns returns a sandbox's runs still running, newest first.
func (c *Client) RunningRuns(ctx context.Context, name string) ([]api.Run, error) {
	var l api.RunList
	if err := c.do(ctx, http.MethodGet, sandboxPath(name, "runs"), url.Values{"status": {api.RunRunning}}, nil, &l); err != nil {
		return nil, err
	}
	return l.Runs, nil
}

// GetRun returns one run record.
func (c *Client) GetRun(ctx context.Context, name, runID string) (*api.Run, error) {
	var run api.Run
	if err := c.do(ctx, http.MethodGet, sandboxPath(name, "runs", url.PathEscape(runID)), nil, nil, &run); err != nil {
		return nil, err
	}
	return &run, nil
}

// Logs streams a run's output: stream is api.StreamStdout or
// api.StreamStderr ("" lets dend choose, stdout), from is the byte offset
// to start at, and with follow the stream stays open until the run ends.
// The caller closes the reader.
func (c *Client) Logs(ctx context.Context, name, runID, stream string, from int64, follow bool) (io.ReadCloser, error) {
	if follow {
		return c.FollowLogs(ctx, name, runID, stream, from, true)
	}
	resp, err := c.logs(ctx, name, runID, stream, from, url.Values{})
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// FollowLogs reads one stream of a run from byte offset from until the
// run ends. A sleeping sandbox is woken when wake is set, else waited
// for. The reader ends with io.EOF only once the run ended and all of
// its output was read; a follow that stops short (the sandbox was put to
// sleep, the connection was cut) ends with a *FollowError saying where
// to resume.
func (c *Client) FollowLogs(ctx context.Context, name, runID, stream string, from int64, wake bool) (io.ReadCloser, error) {
	q := url.Values{"follow": {"true"}}
	if !wake {
		q.Set("wake", "false")
	}
	resp, err := c.logs(ctx, name, runID, stream, from, q)
	if err != nil {
		return nil, err
	}
	return &followReader{resp: resp, run: runID, stream: stream, off: from}, nil
}

func (c *Client) logs(ctx context.Context, name, runID, stream string, from int64, q url.Values) (*http.Response, error) {
	if stream != "" {
		q.Set("stream", stream)
	}
	if from > 0 {
		q.Set("from", strconv.FormatInt(from, 10))
	}
	return c.send(ctx, request{
		method: http.MethodGet,
		path:   sandboxPath(name, "runs", url.PathEscape(runID), "logs"),
		query:  q,
	})
}

// FollowError is how a followed stream that stopped before its run ended
// ends: Offset is where to resume it.
type FollowError struct {
	Run, Stream string
	Offset      int64
	Err         error
}

func (e *FollowError) Error() string {
	return fmt.Sprintf("following the %s of run %s stopped at byte %d before the run ended: %v", e.Stream, e.Run, e.Offset, e.Err)
}

func (e *FollowError) Unwrap() error { return e.Err }

// followReader reads a followed stream and tells, at its end, whether the
// run ended (io.EOF) or the follow stopped short (*FollowError).
type followReader struct {
	resp        *http.Response
	run, stream string
	off         int64
}

func (f *followReader) Read(p []byte) (int, error) {
	n, err := f.resp.Body.Read(p)
	f.off += int64(n)
	switch {
	case err == nil:
		return n, nil
	case errors.Is(err, io.EOF):
		end := f.resp.Trailer.Get(api.LogEndTrailer)
		if end == api.LogEnded {
			return n, io.EOF
		}
		why := errors.New("the stream was cut")
		var apiErr api.Error
		if end != "" && json.Unmarshal([]byte(end), &apiErr) == nil {
			why = &apiErr
		}
		return n, &FollowError{Run: f.run, Stream: f.stream, Offset: f.off, Err: why}
	default:
		return n, &FollowError{Run: f.run, Stream: f.stream, Offset: f.off, Err: err}
	}
}

func (f *followReader) Close() error { return f.resp.Body.Close() }

// SendStdin streams r into the stdin of a run started with stdin (a
// detached one: see api.ExecRequest.Stdin). With closeStdin, stdin is
// closed once r ends, so the command sees end of file; else it stays
// open for more. An empty r with closeStdin just closes it.
func (c *Client) SendStdin(ctx context.Context, name, runID string, r io.Reader, closeStdin bool) error {
	q := url.Values{"close": {strconv.FormatBool(closeStdin)}}
	return c.upload(ctx, http.MethodPost, sandboxPath(name, "runs", url.PathEscape(runID), "stdin"), q, "application/octet-stream", r)
}

// ResizeRun changes the window size of a TTY run's terminal.
func (c *Client) ResizeRun(ctx context.Context, name, runID string, rows, cols uint16) error {
	return c.do(ctx, http.MethodPost, sandboxPath(name, "runs", url.PathEscape(runID), "resize"), nil, api.Resize{Rows: rows, Cols: cols}, nil)
}

// Signal sends a signal ("TERM", "KILL", "INT" or a number) to a run.
func (c *Client) Signal(ctx context.Context, name, runID, signal string) error {
	return c.do(ctx, http.MethodPost, sandboxPath(name, "runs", url.PathEscape(runID), "signal"), nil,
		api.SignalRequest{Signal: signal}, nil)
}
