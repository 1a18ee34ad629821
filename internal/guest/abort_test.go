package guest

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/den-dev/den/internal/errdefs"
)

// TestAbortEndsCallsInFlight: once the instance is known gone, a call
// that waits on it ends at once with the reason, and so does every later
// one, without waiting for TCP to give up.
func TestAbortEndsCallsInFlight(t *testing.T) {
	release := make(chan struct{})
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		select { // a den-init that never answers
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	c := New(netip.MustParseAddrPort(strings.TrimPrefix(srv.URL, "http://")), "token-token-token-token")
	errc := make(chan error, 1)
	go func() {
		_, err := c.Ping(context.Background())
		errc <- err
	}()
	// Let the call reach den-init before aborting it: a connection that
	// is dialed but has not yet carried its request is not enough.
	deadline := time.Now().Add(10 * time.Second)
	for {
		c.mu.Lock()
		n := len(c.conns)
		c.mu.Unlock()
		if n > 0 && requests.Load() > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the call never connected")
		}
		time.Sleep(time.Millisecond) // polling a condition, with a deadline
	}
	c.Abort(errors.New("instance x-g1 is gone: its engine exited"))
	select {
	case err := <-errc:
		if !errors.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), "engine exited") {
			t.Fatalf("the call in flight ended with %v, want unavailable naming the reason", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the call in flight still waits after Abort")
	}
	if _, err := c.Ping(context.Background()); !errors.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), "engine exited") {
		t.Fatalf("a later call: %v", err)
	}
	if n := requests.Load(); n != 1 {
		t.Fatalf("den-init got %d requests, want only the first: a later call should fail without trying", n)
	}
}
