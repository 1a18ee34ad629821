package guest_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
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
