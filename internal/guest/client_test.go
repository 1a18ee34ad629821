package guest_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/guest"
)

func TestClientErrors(t *testing.T) {
	c, srv := serveWith(t)
	ctx := context.Background()

	if _, err := c.Status(ctx, "nope"); !errors.Is(err, errdefs.ErrNotFound) || !strings.Contains(err.Error(), `no process "nope"`) {
		t.Fatalf("unknown process: %v", err)
	}
	_, err := c.Stat(ctx, "relative")
	if !errors.Is(err, errdefs.ErrInvalid) || errdefs.Hint(err) == "" {
		t.Fatalf("bad path: %v (hint %q)", err, errdefs.Hint(err))
	}
	huge := guest.ProcSpec{Argv: []string{"true"}, Env: []string{"X=" + strings.Repeat("x", guest.MaxJSONBody)}}
	if _, err := c.Start(ctx, huge); !errors.Is(err, errdefs.ErrTooLarge) {
		t.Fatalf("oversized spec: %v", err)
	}

	addr := netip.MustParseAddrPort(srv.Addr())
	wrong := guest.New(addr, "wrong")
	defer wrong.Close()
	if _, err := wrong.Ping(ctx); err == nil || errdefs.Class(err) != nil || !strings.Contains(err.Error(), "token") {
		t.Fatalf("wrong token: %v", err)
	}

	// Nothing listens: unavailable, wrapping the cause.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	closed := netip.MustParseAddrPort(ln.Addr().String())
	ln.Close()
	gone := guest.New(closed, testToken)
	defer gone.Close()
	_, err = gone.Ping(ctx)
	if !errors.Is(err, errdefs.ErrUnavailable) || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("nothing listening: %v", err)
	}
	// The caller's own cancellation stays a cancellation.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := c.Ping(cctx); !errors.Is(err, context.Canceled) || errors.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("cancelled: %v", err)
	}
}

// A stream whose connection breaks ends in an unavailable error, which
// tells the caller to reconnect.
func TestStreamBreaks(t *testing.T) {
	c, srv := serveWith(t)
	ctx := context.Background()
	st, err := c.Start(ctx, guest.ProcSpec{
		Argv:    []string{"sh", "-c", "echo hi; exec sleep 1000"},
		Timeout: 2 * time.Second, // ends it once the server is gone
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Stream(ctx, st.ID, 0, 0, func(byte, []byte) error {
		srv.Close()
		return nil
	})
	if !errors.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("broken stream: %v, want unavailable", err)
	}
}

// Rekey hands den-init a new token and the client switches to it; a
// refused rekey changes nothing, and a stream opened before goes on.
func TestRekey(t *testing.T) {
	c, srv := serveWith(t)
	ctx := t.Context()
	if _, err := c.Rekey(ctx, "short", nil); !errors.Is(err, errdefs.ErrInvalid) {
		t.Fatalf("short token: %v, want invalid", err)
	}
	if _, err := c.Ping(ctx); err != nil {
		t.Fatalf("a refused rekey changed the token: %v", err)
	}
	addr := netip.MustParseAddrPort(srv.Addr()) // set once serving

	st, err := c.Start(ctx, guest.ProcSpec{Argv: []string{"sh", "-c", "echo ready; read x; echo $x"}, Stdin: true})
	if err != nil {
		t.Fatal(err)
	}
	streaming := make(chan struct{})
	streamed := make(chan result, 1)
	go func() {
		var out strings.Builder
		final, err := c.Stream(ctx, st.ID, 0, 0, func(_ byte, p []byte) error {
			if out.Len() == 0 {
				close(streaming)
			}
			out.Write(p)
			return nil
		})
		if err != nil {
			t.Errorf("stream across the rekey: %v", err)
		}
		streamed <- result{stdout: out.String(), status: final}
	}()

	select {
	case <-streaming:
	case got := <-streamed:
		t.Fatalf("stream ended before any output: %+v", got)
	}

	// Calls racing the change may be refused, but never race in the client.
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
					_, _ = c.Ping(ctx)
				}
			}
		})
	}
	newToken := "0123456789abcdef-fresh"
	_, err = c.Rekey(ctx, newToken, nil)
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}

	if err := c.Stdin(ctx, st.ID, strings.NewReader("after rekey\n"), false); err != nil {
		t.Fatalf("client after rekey: %v", err)
	}
	if got := <-streamed; got.stdout != "ready\nafter rekey\n" || got.status.Running {
		t.Fatalf("stream opened before the rekey ended with %q, %+v", got.stdout, got.status)
	}

	old := guest.New(addr, testToken)
	defer old.Close()
	if _, err := old.Ping(ctx); err == nil || !strings.Contains(err.Error(), "token") {
		t.Fatalf("old token after rekey: %v, want refused", err)
	}
	fresh := guest.New(addr, newToken)
	defer fresh.Close()
	if _, err := fresh.Ping(ctx); err != nil {
		t.Fatalf("new token: %v", err)
	}
}

// A den-init from before limits came with the rekey answers 204 and
// ignores them: Rekey takes the token and reports the limits not set, so
// the caller sets them itself.
func TestRekeyWithLimitsFromAnOlderDenInit(t *testing.T) {
	var got guest.RekeyRequest
	old := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/rekey" || json.NewDecoder(r.Body).Decode(&got) != nil {
			http.Error(w, "unexpected", http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer old.Close()
	c := guest.New(netip.MustParseAddrPort(strings.TrimPrefix(old.URL, "http://")), testToken)
	defer c.Close()
	set, err := c.Rekey(t.Context(), "0123456789abcdef-new", &guest.Limits{PIDs: 7})
	if err != nil || set {
		t.Fatalf("rekey of an older den-init: limits set %v, %v; want false, nil", set, err)
	}
	if got.Token != "0123456789abcdef-new" || got.Limits == nil || got.Limits.PIDs != 7 {
		t.Errorf("request %+v: want the token and the limits", got)
	}
}
