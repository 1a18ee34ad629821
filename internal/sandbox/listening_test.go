package sandbox

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/guest"
)

// A den-init that listens late gets its first call once, when it listens;
// one that answers with an error, or takes the connection and never
// answers, is not called again.
func TestWhenListening(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := netip.MustParseAddrPort(ln.Addr().String())
	ln.Close() // refused until the server below listens

	var rekeys atomic.Int32
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/rekey":
			rekeys.Add(1)
			w.WriteHeader(http.StatusNoContent)
		case "/v1/ping":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte(`{"code":"unavailable","message":"not today"}`))
		}
	})}
	t.Cleanup(func() { srv.Close() })
	go func() {
		time.Sleep(50 * time.Millisecond)
		late, err := net.Listen("tcp", addr.String())
		if err != nil {
			t.Error(err)
			return
		}
		srv.Serve(late)
	}()

	s := &Service{cfg: Config{BootTimeout: 5 * time.Second}}
	sb := &Sandbox{ID: "sb1", Name: "one", Generation: 1}
	g := guest.New(addr, "boot-token-0123456789")
	defer g.Close()
	calls := 0
	err = s.whenListening(context.Background(), sb, func(ctx context.Context) error {
		calls++
		_, err := g.Rekey(ctx, "own-token-0123456789", nil)
		return err
	})
	if err != nil {
		t.Fatalf("rekey once listening: %v", err)
	}
	if calls < 2 {
		t.Errorf("the call was made %d times: the first should have been refused", calls)
	}
	if n := rekeys.Load(); n != 1 {
		t.Errorf("den-init was rekeyed %d times, want once", n)
	}

	calls = 0
	err = s.whenListening(context.Background(), sb, func(ctx context.Context) error {
		calls++
		_, err := g.Ping(ctx)
		return err
	})
	if !errors.Is(err, errdefs.ErrUnavailable) || calls != 1 {
		t.Errorf("an error answer: err %v after %d calls, want den-init's unavailable after one", err, calls)
	}

	// A connection taken but never answered fails at BootTimeout, not
	// after the call's own deadline, and is not made again.
	hung, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hung.Close()
	s.cfg.BootTimeout = 200 * time.Millisecond
	g2 := guest.New(netip.MustParseAddrPort(hung.Addr().String()), "boot-token-0123456789")
	defer g2.Close()
	calls = 0
	start := time.Now()
	err = s.whenListening(context.Background(), sb, func(ctx context.Context) error {
		calls++
		_, err := g2.Rekey(ctx, "own-token-0123456789", nil)
		return err
	})
	if !errors.Is(err, errdefs.ErrUnavailable) || calls != 1 || time.Since(start) > 5*time.Second {
		t.Errorf("a hung den-init: err %v after %d calls in %s, want unavailable after one call at BootTimeout", err, calls, time.Since(start))
	}
}

func TestNotConnected(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, err = net.Dial("tcp", addr)
	if !notConnected(errors.Join(errors.New("reaching den-init"), err)) {
		t.Errorf("a refused dial (%v) counts as connected", err)
	}
	if notConnected(errors.New("den-init: bad token")) || notConnected(&net.OpError{Op: "read", Err: errors.New("reset")}) {
		t.Error("an error after connecting counts as never connected")
	}
}
