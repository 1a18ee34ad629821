package guest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/den-dev/den/internal/errdefs"
)

// maxFrame bounds a frame's payload; den-init sends at most 64 KiB.
const maxFrame = 16 << 20

// Client talks to den-init in one instance. It is safe for concurrent use
// and keeps connections alive between calls.
type Client struct {
	base  string                 // http://addr
	auth  atomic.Pointer[string] // "Bearer <token>"
	httpc *http.Client
	// aborted is why the instance is known gone (see Abort); nil while
	// it may be there.
	aborted atomic.Pointer[error]

	mu sync.Mutex
	// conns are the connections open to den-init now.
	conns map[net.Conn]struct{}
}

// A den-init that stops answering must not hang its callers. dend's
// engine watch learns at once when an instance dies and ends every call
// to it with Abort; unary calls have a deadline besides, and idle
// connections are probed (TCP keepalive). Streams have no deadline: a
// paused sandbox's den-init answers nothing until it thaws, and its
// output streams must outlast that.
const (
	dialTimeout  = 2 * time.Second
	keepAlive    = 30 * time.Second
	callDeadline = 2 * time.Minute
)

// New returns a client for den-init at addr with the instance's token.
// It never goes through a proxy: den-init is on a private link.
func New(addr netip.AddrPort, token string) *Client {
	c := &Client{base: "http://" + addr.String(), conns: map[net.Conn]struct{}{}}
	dialer := &net.Dialer{Timeout: dialTimeout, KeepAlive: keepAlive}
	tr := &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, network, address string) (net.Conn, error) {
			if err := c.abortErr(); err != nil {
				return nil, err
			}
			conn, err := dialer.DialContext(ctx, network, address)
			if err != nil {
				return nil, err
			}
			return c.track(conn), nil
		},
		MaxIdleConns:          64,
		MaxIdleConnsPerHost:   16,
		IdleConnTimeout:       90 * time.Second,
		DisableCompression:    true,
		ExpectContinueTimeout: 0,
	}
	c.httpc = &http.Client{Transport: tr}
	c.setToken(token)
	return c
}

// trackedConn is a connection the Client can close under its user.
type trackedConn struct {
	net.Conn
	c    *Client
	once sync.Once
}

func (t *trackedConn) Close() error {
	t.once.Do(func() {
		t.c.mu.Lock()
		delete(t.c.conns, t.Conn)
		t.c.mu.Unlock()
	})
	return t.Conn.Close()
}

func (c *Client) track(conn net.Conn) net.Conn {
	c.mu.Lock()
	c.conns[conn] = struct{}{}
	c.mu.Unlock()
	return &trackedConn{Conn: conn, c: c}
}

// Abort ends every call in flight and fails every later one at once with
// why (classified unavailable): the instance is known to be gone, so
// nothing is to be gained by waiting for it.
func (c *Client) Abort(why error) {
	c.aborted.Store(&why)
	c.mu.Lock()
	conns := make([]net.Conn, 0, len(c.conns))
	for conn := range c.conns {
		conns = append(conns, conn)
	}
	c.mu.Unlock()
	for _, conn := range conns {
		conn.Close()
	}
	c.httpc.CloseIdleConnections()
}

func (c *Client) abortErr() error {
	if p := c.aborted.Load(); p != nil {
		return errdefs.Unavailable("%v", *p)
	}
	return nil
}

func (c *Client) setToken(token string) {
	auth := "Bearer " + token
	c.auth.Store(&auth)
}

// Rekey makes den-init accept only token (at least MinTokenLen bytes)
// from now on; once den-init accepted it, the client uses it for every
// later call. Calls that race a Rekey may be refused. With limits, den-init
// applies them first and Rekey reports whether it did: a den-init from
// before that leaves them to SetLimits.
func (c *Client) Rekey(ctx context.Context, token string, limits *Limits) (limitsSet bool, err error) {
	var out RekeyResponse
	if err := c.call(ctx, http.MethodPost, "/v1/rekey", nil, RekeyRequest{Token: token, Limits: limits}, &out); err != nil {
		return false, err
	}
	c.setToken(token)
	return out.LimitsSet && limits != nil, nil
}

// Claim makes a den-init that waited in a warm pool the sandbox's: it
// accepts only token from now on, starts a new identity and, when
// hostname is set, names the sandbox (see ClaimRequest). ErrConflict
// when anything ran in it; ErrNotFound when a hostname was asked and it
// has no helper to set it.
func (c *Client) Claim(ctx context.Context, token, hostname string) error {
	if err := c.call(ctx, http.MethodPost, "/v1/claim", nil, ClaimRequest{Token: token, Hostname: hostname}, nil); err != nil {
		return err
	}
	c.setToken(token)
	return nil
}

// Close drops the idle connections.
func (c *Client) Close() { c.httpc.CloseIdleConnections() }

// Ping returns den-init's identity; its BootID changes when den-init does.
func (c *Client) Ping(ctx context.Context) (Info, error) {
	var info Info
	err := c.call(ctx, http.MethodGet, "/v1/ping", nil, nil, &info)
	return info, err
}

// Processes lists every process in the sandbox but den-init.
func (c *Client) Processes(ctx context.Context) ([]Process, error) {
	var out []Process
	err := c.call(ctx, http.MethodGet, "/v1/ps", nil, nil, &out)
	return out, err
}

// Start starts a process and returns at once; read its output with Stream.
func (c *Client) Start(ctx context.Context, spec ProcSpec) (ProcStatus, error) {
	var st ProcStatus
	if len(spec.Secrets) == 0 {
		err := c.call(ctx, http.MethodPost, "/v1/procs", nil, spec, &st)
		return st, err
	}
	body, err := EncodeStart(spec)
	if err != nil {
		return st, err
	}
	defer clear(body)
	resp, err := c.do(ctx, http.MethodPost, "/v1/procs", nil, bytes.NewReader(body), ContentTypeSecrets)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return st, c.broken(ctx, "reading den-init's answer", err)
	}
	return st, nil
}

// Status returns a process's status.
func (c *Client) Status(ctx context.Context, id string) (ProcStatus, error) {
	var st ProcStatus
	err := c.call(ctx, http.MethodGet, "/v1/procs/"+url.PathEscape(id), nil, nil, &st)
	return st, err
}

// List returns every process den-init keeps, oldest first.
func (c *Client) List(ctx context.Context) ([]ProcStatus, error) {
	var out []ProcStatus
	err := c.call(ctx, http.MethodGet, "/v1/procs", nil, nil, &out)
	return out, err
}

// Stream calls fn with the process's output from the given offsets on, in
// order within each stream, until the process has exited and all its
// output was delivered; it then returns the final status. fn must not keep
// p after it returns; an error from fn ends the stream and is returned.
//
// When the connection breaks midway Stream returns an error of class
// unavailable; call it again with the offsets reached so far (the start
// offsets plus the bytes fn received) to go on without loss or repetition.
func (c *Client) Stream(ctx context.Context, id string, stdoutFrom, stderrFrom int64, fn func(kind byte, p []byte) error) (ProcStatus, error) {
	q := url.Values{
		"stdout": {strconv.FormatInt(stdoutFrom, 10)},
		"stderr": {strconv.FormatInt(stderrFrom, 10)},
	}
	resp, err := c.do(ctx, http.MethodGet, "/v1/procs/"+url.PathEscape(id)+"/stream", q, nil, "")
	if err != nil {
		return ProcStatus{}, err
	}
	defer resp.Body.Close()
	return c.readFrames(ctx, resp.Body, "process "+id, nil, fn)
}

// StartStream starts a process and streams its output in the same
// request: started is called once with its status before any output, then
// it goes on like Stream from offset 0. An error from started ends the
// stream (the process keeps running). If the connection breaks after
// started, resume with Stream.
func (c *Client) StartStream(ctx context.Context, spec ProcSpec, started func(ProcStatus) error, fn func(kind byte, p []byte) error) (ProcStatus, error) {
	body, ctype := []byte(nil), "application/json"
	var err error
	if len(spec.Secrets) == 0 {
		body, err = json.Marshal(spec)
	} else {
		body, err = EncodeStart(spec)
		ctype = ContentTypeSecrets
		defer clear(body)
	}
	if err != nil {
		return ProcStatus{}, fmt.Errorf("encoding process spec: %w", err)
	}
	resp, err := c.do(ctx, http.MethodPost, "/v1/procs", url.Values{"stream": {"1"}}, bytes.NewReader(body), ctype)
	if err != nil {
		return ProcStatus{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusCreated {
		// A den-init from before streamed starts (still running in a sandbox
		// booted by an older dend) answers with the status alone.
		var st ProcStatus
		if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
			return ProcStatus{}, fmt.Errorf("decoding status of process %s: %w", firstArg(spec.Argv), err)
		}
		if err := started(st); err != nil {
			return ProcStatus{}, err
		}
		return c.Stream(ctx, st.ID, 0, 0, fn)
	}
	return c.readFrames(ctx, resp.Body, "process "+firstArg(spec.Argv), started, fn)
}

func firstArg(argv []string) string {
	if len(argv) == 0 {
		return ""
	}
	return argv[0]
}

// readFrames parses a frame stream until its exit frame.
func (c *Client) readFrames(ctx context.Context, body io.Reader, what string, started func(ProcStatus) error, fn func(kind byte, p []byte) error) (ProcStatus, error) {
	br := bufio.NewReaderSize(body, 64<<10)
	var hdr [5]byte
	var buf []byte
	for {
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			return ProcStatus{}, c.broken(ctx, "reading output of "+what, err)
		}
		n := binary.BigEndian.Uint32(hdr[1:])
		if n > maxFrame {
			return ProcStatus{}, fmt.Errorf("den-init sent a %d byte frame, over the %d limit", n, maxFrame)
		}
		if cap(buf) < int(n) {
			buf = make([]byte, n)
		}
		p := buf[:n]
		if _, err := io.ReadFull(br, p); err != nil {
			return ProcStatus{}, c.broken(ctx, "reading output of "+what, err)
		}
		switch hdr[0] {
		case FrameStdout, FrameStderr:
			if err := fn(hdr[0], p); err != nil {
				return ProcStatus{}, err
			}
		case FrameStarted, FrameExit:
			var st ProcStatus
			if err := json.Unmarshal(p, &st); err != nil {
				return ProcStatus{}, fmt.Errorf("decoding status of %s: %w", what, err)
			}
			if hdr[0] == FrameExit {
				return st, nil
			}
			if started == nil {
				return ProcStatus{}, fmt.Errorf("den-init sent an unexpected start frame")
			}
			if err := started(st); err != nil {
				return ProcStatus{}, err
			}
		default:
			return ProcStatus{}, fmt.Errorf("den-init sent a frame of unknown kind %d", hdr[0])
		}
	}
}

// Stdin copies r into the process's stdin. When r ends, stdin is closed
// (for a terminal, ^D is typed), unless keepOpen: then Stdin may be
// called again with more. If the call fails midway, stdin stays open and
// Stdin may be called again with the rest.
func (c *Client) Stdin(ctx context.Context, id string, r io.Reader, keepOpen bool) error {
	var q url.Values
	if keepOpen {
		q = url.Values{"close": {"0"}}
	}
	resp, err := c.do(ctx, http.MethodPost, "/v1/procs/"+url.PathEscape(id)+"/stdin", q, r, "application/octet-stream")
	if err != nil {
		return err
	}
	return drain(resp)
}

// Signal sends sig to the process's group.
func (c *Client) Signal(ctx context.Context, id string, sig syscall.Signal) error {
	return c.call(ctx, http.MethodPost, "/v1/procs/"+url.PathEscape(id)+"/signal", nil, SignalRequest{Signal: int(sig)}, nil)
}

// Resize sets the size of the process's terminal.
func (c *Client) Resize(ctx context.Context, id string, rows, cols uint16) error {
	return c.call(ctx, http.MethodPost, "/v1/procs/"+url.PathEscape(id)+"/resize", nil, ResizeRequest{Rows: rows, Cols: cols}, nil)
}

// Ack tells den-init the host has kept the output before these offsets,
// so it may drop it (and read more from a process it held back).
func (c *Client) Ack(ctx context.Context, id string, stdout, stderr int64) error {
	return c.call(ctx, http.MethodPost, "/v1/procs/"+url.PathEscape(id)+"/ack", nil, AckRequest{Stdout: stdout, Stderr: stderr}, nil)
}

// Release makes den-init forget an exited process and its output.
func (c *Client) Release(ctx context.Context, id string) error {
	return c.call(ctx, http.MethodDelete, "/v1/procs/"+url.PathEscape(id), nil, nil, nil)
}

// Shutdown ends every process (SIGTERM, grace, SIGKILL) and syncs the
// file systems. den-init keeps serving; the host destroys the instance.
func (c *Client) Shutdown(ctx context.Context, grace time.Duration) error {
	return c.call(ctx, http.MethodPost, "/v1/shutdown", nil, ShutdownRequest{GraceMS: grace.Milliseconds()}, nil)
}

// Sync flushes the sandbox's file systems to stable storage.
func (c *Client) Sync(ctx context.Context) error {
	return c.call(ctx, http.MethodPost, "/v1/sync", nil, nil, nil)
}

// Scrub removes the secret files and has den-init give back the memory
// it freed, before the sandbox's memory is saved.
func (c *Client) Scrub(ctx context.Context) error {
	return c.call(ctx, http.MethodPost, "/v1/scrub", nil, nil, nil)
}

// call sends a JSON body (when in is not nil) and decodes a JSON answer
// into out (when not nil).
func (c *Client) call(ctx context.Context, method, path string, q url.Values, in, out any) error {
	ctx, cancel := context.WithTimeout(ctx, callDeadline)
	defer cancel()
	var body io.Reader
	ctype := ""
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("encoding request: %w", err)
		}
		body, ctype = bytes.NewReader(b), "application/json"
	}
	resp, err := c.do(ctx, method, path, q, body, ctype)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil || resp.StatusCode == http.StatusNoContent {
		// No answer asked for, or none given (out keeps its zero value).
		return drain(resp)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return c.broken(ctx, "reading den-init's answer", err)
	}
	return nil
}

// do sends a request and returns the response if it is a success; any
// other answer becomes the error den-init described.
func (c *Client) do(ctx context.Context, method, path string, q url.Values, body io.Reader, ctype string) (*http.Response, error) {
	if err := c.abortErr(); err != nil {
		return nil, fmt.Errorf("reaching den-init: %w", err)
	}
	u := c.base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, fmt.Errorf("building request %s %s: %w", method, path, err)
	}
	req.Header.Set("Authorization", *c.auth.Load())
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := c.httpc.Do(req)
	if err != nil {
		return nil, c.broken(ctx, "reaching den-init", err)
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return resp, nil
	}
	defer resp.Body.Close()
	return nil, responseError(resp)
}

// ErrTokenRefused is den-init answering, but not to the token the client
// presents: it holds another instance's (a restored den-init, until it is
// given its own).
var ErrTokenRefused = errors.New("den-init refused the instance token")

// responseError turns den-init's error answer into an error of the class
// its code names, with its message and hint.
func responseError(resp *http.Response) error {
	var e ErrorBody
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if json.Unmarshal(b, &e) != nil || e.Message == "" {
		e.Message = fmt.Sprintf("den-init answered %s", resp.Status)
	}
	var err error
	switch e.Code {
	case "invalid":
		err = errdefs.Invalid("%s", e.Message)
	case "not_found":
		err = errdefs.NotFound("%s", e.Message)
	case "conflict":
		err = errdefs.Conflict("%s", e.Message)
	case "too_large":
		err = errdefs.TooLarge("%s", e.Message)
	case "unavailable":
		err = errdefs.Unavailable("%s", e.Message)
	case "unauthorized":
		return ErrTokenRefused
	default:
		return fmt.Errorf("den-init: %s", e.Message)
	}
	if e.Hint != "" {
		err = errdefs.WithHint(err, e.Hint)
	}
	return err
}

// broken classifies a transport failure: the caller's own cancellation
// stays what it is; anything else means den-init is unavailable (not
// running, restoring, or the link dropped) and the call may be retried.
func (c *Client) broken(ctx context.Context, doing string, err error) error {
	if aerr := c.abortErr(); aerr != nil {
		return fmt.Errorf("%s: %w", doing, aerr)
	}
	if ctx.Err() != nil {
		return fmt.Errorf("%s: %w", doing, ctx.Err())
	}
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("%w: %w", errdefs.Unavailable("%s", doing), err)
}

// drain reads what is left of a response so its connection can be reused.
func drain(resp *http.Response) error {
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return nil
}
