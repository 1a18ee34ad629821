package integration

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/den-dev/den/api"
)

// cutProxy stands between the CLI and dend on a unix socket of its own. It
// passes every request on, notes its idempotency key, and turns a failure
// to reach dend into a dropped connection (not a 502), as the CLI would
// see dend die. With dropAnswers, it drops that many answers after dend
// gave them; holdNextAnswer keeps one back until the test lets it drop.
type cutProxy struct {
	d      *dend
	socket string
	keys   chan string

	mu          sync.Mutex
	dropAnswers int
	holding     chan struct{} // armed by holdNextAnswer; closed by its release
	heldKey     string        // the key whose answer is held, once seen
	gate        *bodyGate     // set by stallBodies
}

var errDropped = errors.New("answer dropped on purpose")

func newCutProxy(t *testing.T, d *dend) *cutProxy {
	t.Helper()
	p := &cutProxy{d: d, socket: filepath.Join(t.TempDir(), "cut.sock"), keys: make(chan string, 16)}
	ln, err := net.Listen("unix", p.socket)
	if err != nil {
		t.Fatal(err)
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(&url.URL{Scheme: "http", Host: "den"})
			r.Out.Body = p.gated(r.Out.Body)
			if k := r.In.Header.Get(api.IdempotencyKeyHeader); k != "" {
				p.mu.Lock()
				if p.holding != nil && p.heldKey == "" {
					p.heldKey = k
				}
				p.mu.Unlock()
				select {
				case p.keys <- k:
				default:
				}
			}
		},
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var dl net.Dialer
			return dl.DialContext(ctx, "unix", d.socket)
		}},
		ModifyResponse: func(resp *http.Response) error {
			resp.Body = p.gated(resp.Body)
			p.mu.Lock()
			if k := resp.Request.Header.Get(api.IdempotencyKeyHeader); k != "" && k == p.heldKey {
				p.heldKey = "" // its retries pass
				release := p.holding
				p.mu.Unlock()
				<-release
				return errDropped
			}
			defer p.mu.Unlock()
			if p.dropAnswers > 0 {
				p.dropAnswers--
				return errDropped
			}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if conn, _, herr := http.NewResponseController(w).Hijack(); herr == nil {
				conn.Close()
			}
		},
	}
	srv := &http.Server{Handler: rp}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return p
}

// holdNextAnswer makes the proxy keep back dend's answer to the next
// request that carries an idempotency key, until release; the answer is
// then dropped, so the CLI never hears it whatever dend did. Retries of
// that request pass.
func (p *cutProxy) holdNextAnswer() (release func()) {
	ch := make(chan struct{})
	p.mu.Lock()
	p.holding, p.heldKey = ch, ""
	p.mu.Unlock()
	return func() {
		p.mu.Lock()
		p.holding, p.heldKey = nil, ""
		p.mu.Unlock()
		close(ch)
	}
}

// stallBodies makes the proxy pass the first n bytes of every body, of a
// request or an answer, and hold the rest until release: a transfer
// stands half-way for as long as the test needs. held is closed once a
// body reaches the gate.
func (p *cutProxy) stallBodies(n int64) (held <-chan struct{}, release func()) {
	g := &bodyGate{after: n, held: make(chan struct{}), open: make(chan struct{})}
	p.mu.Lock()
	p.gate = g
	p.mu.Unlock()
	var once sync.Once
	return g.held, func() {
		once.Do(func() {
			p.mu.Lock()
			p.gate = nil
			p.mu.Unlock()
			close(g.open)
		})
	}
}

// gated puts body behind the gate, if one is set.
func (p *cutProxy) gated(body io.ReadCloser) io.ReadCloser {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.gate == nil || body == nil || body == http.NoBody {
		return body
	}
	return &gatedBody{ReadCloser: body, g: p.gate}
}

// bodyGate holds bodies past after bytes until open is closed.
type bodyGate struct {
	after      int64
	once       sync.Once
	held, open chan struct{}
}

type gatedBody struct {
	io.ReadCloser
	g    *bodyGate
	read int64
}

func (b *gatedBody) Read(buf []byte) (int, error) {
	if b.read >= b.g.after {
		b.g.once.Do(func() { close(b.g.held) })
		<-b.g.open
	} else if room := b.g.after - b.read; int64(len(buf)) > room {
		buf = buf[:room]
	}
	n, err := b.ReadCloser.Read(buf)
	b.read += int64(n)
	return n, err
}

// denVia runs the CLI through the proxy, in the background (see cli).
func (p *cutProxy) denVia(ctx context.Context, args ...string) (wait func() (string, string, int), stderr func() string) {
	return p.d.cliAt(ctx, p.socket, args...)
}

// TestLostConnectionReportsTheOutcome: the CLI's connection to dend drops
// mid-change, once with dend killed while it works and once with dend's
// answer lost on the way; the CLI says what became of the change, and
// never does it twice.
func TestLostConnectionReportsTheOutcome(t *testing.T) {
	d := startDend(t)
	d.create("s4")
	p := newCutProxy(t, d)

	t.Run("answer lost", func(t *testing.T) {
		p.mu.Lock()
		p.dropAnswers = 1
		p.mu.Unlock()
		wait, errs := p.denVia(ctxT(t, time.Minute), "pause", "s4")
		_, stderr, code := within(t, time.Minute, "den pause", wait, errs)
		t.Logf("den pause: exit %d\n%s", code, stderr)
		if code != 0 || !strings.Contains(stderr, "den: lost the connection to dend while pausing sandbox s4; it came back and the pause had completed") {
			t.Fatalf("den pause: exit %d, stderr %q", code, stderr)
		}
		sb, err := d.c.GetSandbox(ctxT(t, 10*time.Second), "s4")
		if err != nil || sb.State != "paused" {
			t.Fatalf("after the pause: %+v, %v", sb, err)
		}
		evs, err := d.c.Events(ctxT(t, 10*time.Second), "s4")
		if err != nil {
			t.Fatal(err)
		}
		pauses := 0
		for _, ev := range evs {
			if ev.To == "paused" {
				pauses++
			}
		}
		if pauses != 1 {
			t.Errorf("paused %d times, want once: %+v", pauses, evs)
		}
	})

	t.Run("dend killed mid-hibernate", func(t *testing.T) {
		for len(p.keys) > 0 {
			<-p.keys
		}
		wait, errs := p.denVia(ctxT(t, time.Minute), "hibernate", "s4")
		key := <-p.keys
		waitFor(t, 30*time.Second, "the hibernate to be under way", func() bool {
			st, err := d.c.Request(ctxT(t, 5*time.Second), key)
			return err == nil && st.State == api.RequestInProgress
		})
		d.kill()
		d.start()
		_, stderr, code := within(t, time.Minute, "den hibernate", wait, errs)
		t.Logf("den hibernate: exit %d\n%s", code, stderr)
		if code != 1 || strings.Contains(stderr, `Post "`) ||
			!strings.Contains(stderr, "den: lost the connection to dend while hibernating sandbox s4, and dend was interrupted before it finished: the hibernation may or may not have happened") ||
			!strings.Contains(stderr, "hint: check with `den inspect s4`") {
			t.Fatalf("den hibernate: exit %d, stderr %q", code, stderr)
		}
		st, err := d.c.Request(ctxT(t, 10*time.Second), key)
		if err != nil || st.State != api.RequestInterrupted || !strings.Contains(st.Hint, "den inspect s4") {
			t.Errorf("GET /v1/requests/%s = %+v, %v", key, st, err)
		}
		if _, errOut, code := d.den("inspect", "s4"); code != 0 {
			t.Errorf("den inspect s4 after the crash: exit %d, %s", code, errOut)
		}
	})
}
