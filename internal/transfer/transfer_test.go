package transfer

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/guest"
)

// guestFiles is den-init's file system as far as a transfer sees it:
// Stat waits until started is closed or ctx ends, ReadFile hands back a
// reader at once.
type guestFiles struct {
	Files   // the calls these tests do not make
	started chan struct{}
}

func (g *guestFiles) Stat(ctx context.Context, path string) (guest.FileInfo, error) {
	if g.started != nil {
		close(g.started)
	}
	<-ctx.Done()
	return guest.FileInfo{}, ctx.Err()
}

func (g *guestFiles) ReadFile(ctx context.Context, path string) (io.ReadCloser, guest.FileInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, guest.FileInfo{}, err
	}
	return io.NopCloser(strings.NewReader("contents")), guest.FileInfo{}, nil
}

// holds counts the sandboxes a registry holds in use.
type holds struct {
	mu sync.Mutex
	n  map[string]int
}

func (h *holds) hold(id string) func() {
	h.mu.Lock()
	h.n[id]++
	h.mu.Unlock()
	return func() {
		h.mu.Lock()
		h.n[id]--
		h.mu.Unlock()
	}
}

func (h *holds) of(id string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n[id]
}

// A sleep ends the transfer under way with an error naming the sandbox
// and the verb, and one begun later through a file system handed out
// before the sleep is refused; one handed out after goes through.
func TestEndEndsTransfers(t *testing.T) {
	h := &holds{n: map[string]int{}}
	r := NewRegistry(h.hold)
	g := &guestFiles{started: make(chan struct{})}
	before := r.Files("sb1", g)
	other := r.Files("sb2", &guestFiles{})

	done := make(chan error)
	go func() {
		_, err := before.Stat(context.Background(), "/big")
		done <- err
	}()
	<-g.started
	if n := h.of("sb1"); n != 1 {
		t.Fatalf("a transfer under way holds its sandbox %d times, want 1", n)
	}
	r.End("sb1", "web", "paused")
	err := <-done
	if !errors.Is(err, errdefs.ErrConflict) || !strings.Contains(err.Error(), `sandbox "web" was paused during the file transfer`) || errdefs.Hint(err) == "" {
		t.Fatalf("transfer under a pause: %v (hint %q), want a conflict saying it was paused, with a hint", err, errdefs.Hint(err))
	}
	if n := h.of("sb1"); n != 0 {
		t.Fatalf("an ended transfer still holds its sandbox (%d)", n)
	}

	if _, _, err := before.ReadFile(context.Background(), "/f"); !errors.Is(err, errdefs.ErrConflict) || !strings.Contains(err.Error(), "went to sleep before the file transfer began") {
		t.Fatalf("transfer through a file system handed out before the sleep: %v", err)
	}
	if n := h.of("sb1"); n != 0 {
		t.Fatalf("a refused transfer still holds its sandbox (%d)", n)
	}
	if _, _, err := other.ReadFile(context.Background(), "/f"); err != nil {
		t.Fatalf("another sandbox's transfer: %v", err)
	}

	rc, _, err := r.Files("sb1", g).ReadFile(context.Background(), "/f")
	if err != nil {
		t.Fatalf("transfer through a file system handed out after the sleep: %v", err)
	}
	if n := h.of("sb1"); n != 1 {
		t.Fatalf("an open download holds its sandbox %d times, want 1", n)
	}
	if b, err := io.ReadAll(rc); err != nil || string(b) != "contents" {
		t.Fatalf("download: %q, %v", b, err)
	}
	rc.Close()
	rc.Close()
	if n := h.of("sb1"); n != 0 {
		t.Fatalf("a closed download still holds its sandbox (%d)", n)
	}
}
