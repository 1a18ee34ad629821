package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

// flakyDend answers POST /v1/sandboxes/s4/restore the way dend does with
// idempotency keys, except that it cuts the connection instead of
// answering as often as drops says: what a client sees when dend is
// killed mid-request.
type flakyDend struct {
	t       *testing.T
	mu      sync.Mutex
	effects int               // restores done
	answers map[string][]byte // by key
	keys    []string          // the key of every attempt
	// drops is how many attempts to cut; then, what a repeat of a key
	// answered earlier gets: "" (the recorded answer), or an
	// Idempotency-Status to answer 409 with, in turn.
	drops   int
	repeats []string
}

func (f *flakyDend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.Method == http.MethodGet { // what the client asks after an interruption
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(api.Sandbox{Name: "s4", State: "running", Generation: 2})
		return
	}
	key := r.Header.Get(api.IdempotencyKeyHeader)
	f.keys = append(f.keys, key)
	_, done := f.answers[key]
	switch {
	case !done:
		f.effects++
		b, _ := json.Marshal(api.Sandbox{Name: "s4", State: "running", Generation: 3})
		f.answers[key] = b
	case len(f.repeats) > 0:
		status := f.repeats[0]
		f.repeats = f.repeats[1:]
		if status != "" {
			w.Header().Set(api.IdempotencyStatusHeader, status)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusConflict)
			_ = json.NewEncoder(w).Encode(api.ErrorBody{Error: &api.Error{Code: api.CodeConflict, Message: status,
				Hint: "check sandbox s4 with `den inspect s4`"}})
			return
		}
		fallthrough
	default:
		w.Header().Set(api.IdempotencyStatusHeader, api.IdempotencyReplayed)
	}
	if f.drops > 0 {
		f.drops--
		drop(f.t, w)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(f.answers[key])
}

// drop cuts the connection without an answer.
func drop(t *testing.T, w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		t.Errorf("hijack: %v", err)
		return
	}
	conn.Close()
}

func startFlaky(t *testing.T, f *flakyDend, wait time.Duration) (*client.Client, *httptest.Server, *[]string) {
	t.Helper()
	f.t, f.answers = t, map[string][]byte{}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	var mu sync.Mutex
	var notices []string
	c, err := client.New(client.WithHost(srv.URL, "tok"), client.WithReconnect(wait, func(msg string) {
		mu.Lock()
		defer mu.Unlock()
		notices = append(notices, msg)
	}))
	if err != nil {
		t.Fatal(err)
	}
	return c, srv, &notices
}

func TestLostConnectionLearnsTheOutcome(t *testing.T) {
	for _, tt := range []struct {
		name    string
		drops   int
		repeats []string
	}{
		{"done before the drop", 1, nil},
		{"still running, then done", 1, []string{api.IdempotencyInProgress, ""}},
		{"dropped twice", 2, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := &flakyDend{drops: tt.drops, repeats: tt.repeats}
			c, _, notices := startFlaky(t, f, 10*time.Second)
			sb, err := c.Restore(t.Context(), "s4", "base")
			if err != nil {
				t.Fatalf("Restore: %v", err)
			}
			if sb.Name != "s4" || sb.Generation != 3 {
				t.Errorf("Restore = %+v, want the recorded answer", sb)
			}
			if f.effects != 1 {
				t.Errorf("the restore was done %d times, want once", f.effects)
			}
			for i, k := range f.keys {
				if k == "" || k != f.keys[0] {
					t.Errorf("attempt %d carried key %q, want the first's %q", i, k, f.keys[0])
				}
			}
			last := (*notices)[len(*notices)-1]
			if want := "lost the connection to dend while restoring sandbox s4; it came back and the restore had completed"; last != want {
				t.Errorf("last notice = %q, want %q", last, want)
			}
		})
	}
}

func TestLostConnectionInterrupted(t *testing.T) {
	f := &flakyDend{drops: 1, repeats: []string{api.IdempotencyInterrupted}}
	c, _, _ := startFlaky(t, f, 10*time.Second)
	_, err := c.Restore(t.Context(), "s4", "base")
	if !client.IsOutcomeUnknown(err) || client.RequestKey(err) != f.keys[0] {
		t.Fatalf("Restore = %v (key %q), want an unknown outcome for key %q", err, client.RequestKey(err), f.keys[0])
	}
	if msg := err.Error(); !strings.Contains(msg, "while restoring sandbox s4") || !strings.Contains(msg, "may or may not have happened (sandbox s4 is now running)") {
		t.Errorf("message = %q", msg)
	}
	if h := client.Hint(err); !strings.Contains(h, "den inspect s4") || !strings.Contains(h, "/v1/requests/"+f.keys[0]) {
		t.Errorf("hint = %q", h)
	}
	if f.effects != 1 {
		t.Errorf("the restore was done %d times, want once", f.effects)
	}
}

func TestLostConnectionAndDendNeverBack(t *testing.T) {
	f := &flakyDend{drops: 1}
	c, srv, _ := startFlaky(t, f, 300*time.Millisecond)
	f.mu.Lock()
	f.drops = 1 << 30 // never answers again: as good as gone
	f.mu.Unlock()
	start := time.Now()
	_, err := c.Hibernate(t.Context(), "s4")
	if time.Since(start) > 5*time.Second {
		t.Errorf("gave up after %s, want about 300ms", time.Since(start))
	}
	if !client.IsOutcomeUnknown(err) || !client.IsUnavailable(err) {
		t.Fatalf("Hibernate = %v, want an unavailable, unknown outcome", err)
	}
	msg := err.Error()
	if !strings.Contains(msg, "while hibernating sandbox s4, and dend is not answering at "+strings.TrimPrefix(srv.URL, "http://")) ||
		!strings.Contains(msg, "may or may not have happened") || strings.Contains(msg, `Post "`) {
		t.Errorf("message = %q", msg)
	}
	if !strings.Contains(client.Hint(err), "den inspect s4") {
		t.Errorf("hint = %q", client.Hint(err))
	}
}

func TestLostConnectionHonoursTheContext(t *testing.T) {
	f := &flakyDend{drops: 1 << 30}
	c, _, _ := startFlaky(t, f, time.Minute)
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	_, err := c.Restore(ctx, "s4", "base")
	if !client.IsOutcomeUnknown(err) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Restore = %v, want an unknown outcome ending with the context", err)
	}
}

func TestDendNotRunningFailsAtOnce(t *testing.T) {
	f := &flakyDend{}
	c, srv, _ := startFlaky(t, f, time.Minute)
	srv.Close()
	start := time.Now()
	_, err := c.Restore(t.Context(), "s4", "base")
	if time.Since(start) > 5*time.Second || !client.IsUnavailable(err) || client.IsOutcomeUnknown(err) {
		t.Fatalf("Restore with dend down = %v after %s; want at once an error that says it was not sent", err, time.Since(start))
	}
	if !strings.Contains(err.Error(), "cannot connect to dend") {
		t.Errorf("message = %q", err)
	}
}

func TestLostConnectionOnAReadIsASentence(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { drop(t, w) }))
	defer srv.Close()
	c, err := client.New(client.WithHost(srv.URL, "tok"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.GetSandbox(t.Context(), "s4")
	if !client.IsUnavailable(err) || client.IsOutcomeUnknown(err) {
		t.Fatalf("GetSandbox = %v, want unavailable", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "lost the connection to dend") || strings.Contains(msg, `Get "`) {
		t.Errorf("message = %q", msg)
	}
}
