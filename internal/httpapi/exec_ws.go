package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"golang.org/x/sync/errgroup"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/httpapi/httpx"
	"github.com/den-dev/den/internal/runlogs"
)

// Limits of the exec stream.
const (
	// wsReadLimit bounds one client message (stdin chunk or control frame).
	wsReadLimit = 1 << 20
	// wsMaxMessage bounds one server message. It is the default read limit
	// of coder/websocket clients, so they need no configuration.
	wsMaxMessage = 32 << 10
	// wsFirstMessageTimeout is how long the client has to send its request.
	wsFirstMessageTimeout = 30 * time.Second
	// hupTimeout bounds the SIGHUP sent when a TTY client goes away.
	hupTimeout = 5 * time.Second
)

// execWebSocket runs an attached command over a WebSocket; the protocol is
// in api/stream.go. After the handshake every failure is reported in-band,
// as a FrameError.
func (s *server) execWebSocket(w http.ResponseWriter, r *http.Request) error {
	if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		return errdefs.WithHint(errdefs.Invalid("this route takes a WebSocket connection"),
			"connect with a WebSocket client (frames are described in api/stream.go), or POST .../exec for a detached run")
	}
	// A browser that offered its token as a subprotocol is answered with
	// api.ExecSubprotocol, or it would drop the connection; other clients
	// offer none and get none.
	conn, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{api.ExecSubprotocol}})
	if err != nil {
		// Accept has answered the client already.
		s.log.Debug("exec websocket handshake failed", "path", r.URL.Path, "err", err)
		return nil
	}
	conn.SetReadLimit(wsReadLimit)
	defer func() {
		// The connection is no longer HTTP: a panic must close it here,
		// or the client would wait for a frame that never comes.
		if v := recover(); v != nil {
			_ = conn.Close(websocket.StatusInternalError, "internal error; see dend's log")
			panic(v)
		}
	}()
	e := &execSession{srv: s, conn: conn, req: r, ref: r.PathValue("name"), finished: make(chan struct{})}
	e.serve(r.Context())
	return nil
}

// execSession is one exec WebSocket, from request to exit.
type execSession struct {
	srv  *server
	conn *websocket.Conn
	req  *http.Request
	ref  string

	// finished is closed once the server sent its last frame (FrameExit or
	// FrameError); a read error after that is the normal close, before it
	// the client going away.
	finished   chan struct{}
	finishOnce sync.Once
	// gone is set when the client went away before the end.
	gone atomic.Bool

	wmu sync.Mutex // serializes writes to conn
}

func (e *execSession) finish() { e.finishOnce.Do(func() { close(e.finished) }) }

// serve runs the session. ctx lives as long as the handler.
func (e *execSession) serve(ctx context.Context) {
	req, err := e.readRequest(ctx)
	if err != nil {
		e.fail(ctx, err)
		return
	}
	p, err := toExecParams(req)
	if err != nil {
		e.fail(ctx, err)
		return
	}
	p.Detach = false // this connection is attached to it
	run, err := e.srv.sandboxes.Exec(ctx, e.ref, p)
	if err != nil {
		e.fail(ctx, err)
		return
	}

	// streamCtx ends the output streams and stdin when the client goes away.
	streamCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var stdin *io.PipeWriter
	var stdinR *io.PipeReader
	if req.Stdin {
		stdinR, stdin = io.Pipe()
		wg.Go(func() {
			err := e.srv.runs.Stdin(streamCtx, e.ref, run.ID, stdinR, false)
			stdinR.CloseWithError(io.ErrClosedPipe) // later stdin frames are dropped
			if err != nil && streamCtx.Err() == nil {
				e.srv.log.Debug("exec stdin ended", "run", run.ID, "err", err)
			}
		})
	}
	wg.Go(func() { e.readClient(ctx, streamCtx, cancel, run.ID, run.TTY, stdin) })
	defer func() {
		// Closing the connection ends readClient; closing the pipe ends
		// a stdin write it may be blocked in, and the Stdin call.
		_ = e.conn.CloseNow()
		cancel()
		if stdinR != nil {
			stdinR.CloseWithError(io.ErrClosedPipe)
		}
		wg.Wait()
	}()

	if err := e.sendJSON(streamCtx, api.FrameStarted, toRun(run)); err != nil {
		return // the client went away; readClient has seen it
	}
	err = e.streamOutput(streamCtx, run.ID)
	if e.gone.Load() {
		return
	}
	if err != nil {
		e.fail(ctx, err)
		return
	}
	final, err := e.srv.runs.Run(ctx, e.ref, run.ID)
	if err != nil {
		e.fail(ctx, err)
		return
	}
	e.finish()
	if err := e.sendJSON(ctx, api.FrameExit, toRun(final)); err != nil {
		return
	}
	_ = e.conn.Close(websocket.StatusNormalClosure, "")
}

// readRequest reads the first message: a text message holding the JSON
// api.ExecRequest.
func (e *execSession) readRequest(ctx context.Context) (api.ExecRequest, error) {
	var req api.ExecRequest
	rctx, cancel := context.WithTimeout(ctx, wsFirstMessageTimeout)
	defer cancel()
	typ, msg, err := e.conn.Read(rctx)
	if err != nil {
		return req, errdefs.Invalid("reading the exec request: %v", err)
	}
	if typ != websocket.MessageText {
		return req, errdefs.WithHint(errdefs.Invalid("the first message is not a text message"),
			"send the JSON ExecRequest as a text message first")
	}
	if err := httpx.DecodeMessage(bytes.NewReader(msg), &req, wsReadLimit); err != nil {
		return req, err
	}
	return req, nil
}

// streamOutput sends stdout and stderr from their start until the run
// ended and all of its output was sent.
func (e *execSession) streamOutput(ctx context.Context, runID string) error {
	g, ctx := errgroup.WithContext(ctx)
	for _, out := range []struct {
		stream string
		kind   api.FrameKind
	}{{api.StreamStdout, api.FrameStdout}, {api.StreamStderr, api.FrameStderr}} {
		g.Go(func() error {
			w := &frameWriter{e: e, ctx: ctx, kind: out.kind}
			return e.srv.logs.Logs(ctx, e.ref, runID, out.stream, 0, runlogs.FollowWake, w)
		})
	}
	return g.Wait()
}

// readClient handles the client's frames until the connection ends. If it
// ends before the last server frame, the client went away: the output
// streams stop, stdin is closed and a TTY run gets SIGHUP, as a terminal's
// process would. A non-TTY run keeps running, readable through its logs.
func (e *execSession) readClient(ctx, streamCtx context.Context, cancel context.CancelFunc, runID string, tty bool, stdin *io.PipeWriter) {
	for {
		typ, msg, err := e.conn.Read(ctx)
		if err != nil {
			if stdin != nil {
				stdin.Close()
			}
			select {
			case <-e.finished:
			default:
				e.gone.Store(true)
				cancel()
				if tty {
					e.hangUp(ctx, runID)
				}
			}
			return
		}
		if typ != websocket.MessageBinary || len(msg) == 0 {
			continue
		}
		payload := msg[1:]
		switch api.FrameKind(msg[0]) {
		case api.FrameStdin:
			if stdin == nil {
				continue // the run has no stdin
			}
			if _, err := stdin.Write(payload); err != nil {
				stdin = nil // the run's stdin is closed; drop the rest
			}
		case api.FrameStdinEOF:
			if stdin != nil {
				stdin.Close()
				stdin = nil
			}
		case api.FrameResize:
			var rz api.Resize
			if err := json.Unmarshal(payload, &rz); err != nil {
				e.srv.log.Debug("exec: bad resize frame", "run", runID, "err", err)
				continue
			}
			if err := e.srv.runs.Resize(streamCtx, e.ref, runID, rz.Rows, rz.Cols); err != nil {
				e.srv.log.Debug("exec: resize failed", "run", runID, "err", err)
			}
		case api.FrameSignal:
			var sr api.SignalRequest
			if err := json.Unmarshal(payload, &sr); err != nil {
				e.srv.log.Debug("exec: bad signal frame", "run", runID, "err", err)
				continue
			}
			if err := e.srv.runs.Signal(streamCtx, e.ref, runID, sr.Signal); err != nil {
				e.srv.log.Debug("exec: signal failed", "run", runID, "signal", sr.Signal, "err", err)
			}
		default:
			e.srv.log.Debug("exec: unknown client frame", "run", runID, "kind", msg[0])
		}
	}
}

// hangUp sends SIGHUP to a TTY run whose client went away.
func (e *execSession) hangUp(ctx context.Context, runID string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), hupTimeout)
	defer cancel()
	if err := e.srv.runs.Signal(ctx, e.ref, runID, "HUP"); err != nil {
		e.srv.log.Debug("exec: SIGHUP after client left failed", "run", runID, "err", err)
	}
}

// fail sends err as the last frame and closes the connection.
func (e *execSession) fail(ctx context.Context, err error) {
	e.finish()
	_, body := httpx.APIError(e.srv.log, e.req, err)
	if e.sendJSON(ctx, api.FrameError, body) == nil {
		_ = e.conn.Close(websocket.StatusNormalClosure, "")
	}
	_ = e.conn.CloseNow()
}

func (e *execSession) sendJSON(ctx context.Context, kind api.FrameKind, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return e.send(ctx, kind, b)
}

// send writes one frame: the kind byte, then the payload.
func (e *execSession) send(ctx context.Context, kind api.FrameKind, payload []byte) error {
	msg := make([]byte, 1+len(payload))
	msg[0] = byte(kind)
	copy(msg[1:], payload)
	e.wmu.Lock()
	defer e.wmu.Unlock()
	return e.conn.Write(ctx, websocket.MessageBinary, msg)
}

// frameWriter turns writes into output frames of at most wsMaxMessage bytes.
type frameWriter struct {
	e    *execSession
	ctx  context.Context
	kind api.FrameKind
}

func (fw *frameWriter) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		chunk := p[:min(len(p), wsMaxMessage-1)]
		if err := fw.e.send(fw.ctx, fw.kind, chunk); err != nil {
			return n, err
		}
		n += len(chunk)
		p = p[len(chunk):]
	}
	return n, nil
}
