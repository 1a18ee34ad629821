// Package client is den's Go SDK: a typed client for dend's REST API
// (/v1), used by the den CLI and by any Go program that drives sandboxes.
//
// A Client talks to dend over its unix socket (the default,
// /run/den/den.sock, root only, no token) or over TCP with a bearer token:
//
//	c, err := client.FromEnv() // DEN_SOCKET, or DEN_HOST + DEN_TOKEN
//	if err != nil { ... }
//	sb, err := c.CreateSandbox(ctx, api.CreateSandboxRequest{Name: "web"})
//	run, err := c.Exec(ctx, "web", api.ExecRequest{Argv: []string{"ls", "-l"}},
//		client.ExecIO{Stdout: os.Stdout, Stderr: os.Stderr})
//
// Every method takes a context; cancelling it abandons the call (a command
// started by Exec keeps running unless it has a TTY). Errors dend reports
// are *Error values: test them with IsNotFound, IsConflict and friends or
// errors.Is against ErrNotFound and the other classes, and show Hint(err)
// to people. Bodies that can be large (file contents, archives, image
// tarballs, logs) are streamed in both directions, never held in memory.
//
// Every call that changes something carries a fresh Idempotency-Key. If
// the connection drops mid-call (dend killed or restarted), the client
// asks dend again with that key until it answers (DefaultReconnect at
// most), and returns the real outcome; when dend cannot tell, the error
// matches ErrOutcomeUnknown, its hint says what to check, and RequestKey
// gives the key for Client.Request. See retry.go.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/den-dev/den/api"
)

// DefaultSocket is where dend listens unless told otherwise.
const DefaultSocket = "/run/den/den.sock"

// Client calls dend. It is safe for concurrent use.
type Client struct {
	base   *url.URL // http://den for the socket, else the host's URL
	socket string   // "" over TCP
	token  string
	hc     *http.Client
	ua     string
	log    *slog.Logger
	// After a lost connection: how long to keep asking, and whom to tell
	// (see retry.go).
	reconnectFor time.Duration
	notice       func(string)
	// filesAs is the user file calls act as in the sandbox; "" is root
	// (see FilesAs).
	filesAs string
	// version, when set, is told the release dend names (version.go).
	version *versionWatch
}

type config struct {
	socket        string
	host          string
	token         string
	hc            *http.Client
	ua            string
	log           *slog.Logger
	reconnectFor  time.Duration
	notice        func(string)
	serverVersion func(string)
}

// Option configures a Client.
type Option func(*config)

// WithSocket talks to dend over the unix socket at path (HTTP over a unix
// socket). This is the default, with DefaultSocket.
func WithSocket(path string) Option {
	return func(c *config) { c.socket, c.host = path, "" }
}

// WithHost talks to dend over TCP at baseURL (e.g. "http://10.0.0.5:7070"),
// sending token as a bearer token.
func WithHost(baseURL, token string) Option {
	return func(c *config) { c.host, c.token, c.socket = baseURL, token, "" }
}

// WithHTTPClient uses hc for every request. Over the unix socket, a client
// without a Transport gets one that dials the socket; one with a Transport
// is used as it is. hc must not set a Timeout, as exec and log streams last
// as long as their commands: use contexts.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *config) { c.hc = hc }
}

// WithUserAgent sets the User-Agent header sent with every request.
func WithUserAgent(ua string) Option {
	return func(c *config) { c.ua = ua }
}

// WithLogger logs every request at debug level to log.
func WithLogger(log *slog.Logger) Option {
	return func(c *config) { c.log = log }
}

// WithReconnect sets how long a request that changes something keeps
// trying to reach dend again after the connection dropped mid-request
// (DefaultReconnect unless set; 0 gives up at once), and notice, when not
// nil, is told in a sentence when that happens and how it ended well.
// Failures are returned as errors, not told.
func WithReconnect(wait time.Duration, notice func(msg string)) Option {
	return func(c *config) { c.reconnectFor, c.notice = wait, notice }
}

// New returns a Client configured by opts; with none, it talks to dend
// over DefaultSocket. New does not contact dend: call Health for that.
func New(opts ...Option) (*Client, error) {
	cfg := config{socket: DefaultSocket, ua: "den-go-client", reconnectFor: DefaultReconnect}
	for _, o := range opts {
		o(&cfg)
	}
	c := &Client{token: cfg.token, ua: cfg.ua, log: cfg.log, reconnectFor: cfg.reconnectFor, notice: cfg.notice}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if cfg.serverVersion != nil {
		c.version = &versionWatch{seen: cfg.serverVersion}
	}
	if cfg.host != "" {
		u, err := parseHost(cfg.host)
		if err != nil {
			return nil, err
		}
		c.base = u
		c.hc = cfg.hc
		if c.hc == nil {
			c.hc = &http.Client{}
		}
		return c, nil
	}
	if cfg.socket == "" {
		return nil, errors.New("no dend address: give a socket path or a host")
	}
	c.socket = cfg.socket
	c.base = &url.URL{Scheme: "http", Host: "den"}
	c.hc = cfg.hc
	if c.hc == nil || c.hc.Transport == nil {
		hc := &http.Client{}
		if cfg.hc != nil {
			*hc = *cfg.hc
		}
		hc.Transport = unixTransport(cfg.socket)
		c.hc = hc
	}
	return c, nil
}

// FromEnv returns a Client configured from the environment: DEN_HOST (with
// DEN_TOKEN) for TCP, else DEN_SOCKET, else DefaultSocket. opts are applied
// after the environment, so they win.
func FromEnv(opts ...Option) (*Client, error) {
	var env []Option
	if host := os.Getenv("DEN_HOST"); host != "" {
		env = append(env, WithHost(host, os.Getenv("DEN_TOKEN")))
	} else if sock := os.Getenv("DEN_SOCKET"); sock != "" {
		env = append(env, WithSocket(sock))
	}
	return New(append(env, opts...)...)
}

func parseHost(host string) (*url.URL, error) {
	if !strings.Contains(host, "://") {
		host = "http://" + host
	}
	u, err := url.Parse(host)
	if err != nil {
		return nil, fmt.Errorf("invalid dend host %q: %w", host, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("invalid dend host %q: want http://HOST:PORT or https://HOST:PORT", host)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	return u, nil
}

func unixTransport(socket string) *http.Transport {
	var d net.Dialer
	return &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return d.DialContext(ctx, "unix", socket)
		},
		MaxIdleConns:          16,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: 0, // logs with follow=true may be quiet for long
	}
}

// request describes one call.
type request struct {
	method      string
	path        string // under /v1, already escaped
	query       url.Values
	body        io.Reader
	contentType string
	header      http.Header // more headers to send
}

// url returns the full URL of path (already escaped, starting with /)
// under /v1, with query. scheme replaces the base URL's scheme when set.
func (c *Client) url(scheme, path string, query url.Values) string {
	if scheme == "" {
		scheme = c.base.Scheme
	}
	s := scheme + "://" + c.base.Host + c.base.EscapedPath() + "/" + api.Version + path
	if len(query) > 0 {
		s += "?" + query.Encode()
	}
	return s
}

// header sets the headers every request carries.
func (c *Client) header(h http.Header) {
	if c.ua != "" {
		h.Set("User-Agent", c.ua)
	}
	if c.token != "" {
		h.Set("Authorization", "Bearer "+c.token)
	}
}

// send performs r and returns the response when its status is 2xx; the
// caller closes its body. Other statuses become *Error. A request that
// changes something carries a fresh idempotency key, and survives a lost
// connection as retry.go tells.
func (c *Client) send(ctx context.Context, r request) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, r.method, c.url("", r.path, r.query), r.body)
	if err != nil {
		return nil, fmt.Errorf("building request %s %s: %w", r.method, r.path, err)
	}
	c.header(req.Header)
	for k, v := range r.header {
		req.Header[k] = v
	}
	if r.contentType != "" {
		req.Header.Set("Content-Type", r.contentType)
	}
	if changes(r.method) {
		req.Header.Set(api.IdempotencyKeyHeader, newKey())
	}
	start := time.Now()
	resp, err := c.hc.Do(req)
	if err != nil {
		switch {
		case ctx.Err() != nil:
			return nil, fmt.Errorf("%s %s: %w", r.method, r.path, ctx.Err())
		case isConnError(err):
			return nil, c.connError(err) // never sent: nothing happened
		case changes(r.method):
			resp, err = c.reconnect(ctx, req, err)
			if err != nil {
				return nil, err
			}
		default:
			return nil, c.lostReading(r, err)
		}
	}
	c.log.Debug("dend request", "method", r.method, "path", r.path, "status", resp.StatusCode, "elapsed", time.Since(start))
	c.heard(resp)
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		return nil, decodeError(resp)
	}
	return resp, nil
}

// isConnError reports whether err means dend could not be reached, as
// opposed to a failure in the middle of a request.
func isConnError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// do performs a call with an optional JSON body in, decoding a JSON
// response into out when out is not nil.
func (c *Client) do(ctx context.Context, method, path string, query url.Values, in, out any) error {
	r := request{method: method, path: path, query: query}
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("encoding %s %s: %w", method, path, err)
		}
		r.body, r.contentType = bytes.NewReader(b), "application/json"
	}
	resp, err := c.send(ctx, r)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("decoding the response to %s %s: %w", method, path, err)
	}
	return nil
}

// sandboxPath returns /sandboxes/{name} followed by the elements of rest.
func sandboxPath(name string, rest ...string) string {
	var b strings.Builder
	b.WriteString("/sandboxes/")
	b.WriteString(url.PathEscape(name))
	for _, r := range rest {
		b.WriteByte('/')
		b.WriteString(r)
	}
	return b.String()
}

// Health reports dend's status and versions.
func (c *Client) Health(ctx context.Context) (*api.Health, error) {
	var h api.Health
	if err := c.do(ctx, http.MethodGet, "/health", nil, nil, &h); err != nil {
		return nil, err
	}
	return &h, nil
}
