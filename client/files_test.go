package client_test

import (
	"context"
	"crypto/sha256"
	"io"
	"net/http"
	"runtime"
	"sync"
	"testing"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

// patternReader yields n bytes of a fixed pattern without allocating.
type patternReader struct{ left int64 }

func (p *patternReader) Read(b []byte) (int, error) {
	if p.left == 0 {
		return 0, io.EOF
	}
	if int64(len(b)) > p.left {
		b = b[:p.left]
	}
	for i := range b {
		b[i] = byte(i*7 + int(p.left))
	}
	p.left -= int64(len(b))
	return len(b), nil
}

func TestWriteFileStreamsWithoutBuffering(t *testing.T) {
	const size = 64 << 20
	want := sha256.New()
	if _, err := io.Copy(want, &patternReader{left: size}); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	var got struct {
		n        int64
		sum      []byte
		chunked  bool
		path     string
		mode     string
		ctype    string
		tooLarge bool
	}
	f := newFake(t)
	f.routes["PUT /v1/sandboxes/{name}/files/content"] = func(w http.ResponseWriter, r *http.Request) {
		h := sha256.New()
		n, err := io.Copy(h, r.Body)
		if err != nil {
			w.WriteHeader(500)
			return
		}
		mu.Lock()
		got.n, got.sum, got.chunked = n, h.Sum(nil), r.ContentLength == -1
		got.path, got.mode, got.ctype = r.URL.Query().Get("path"), r.URL.Query().Get("mode"), r.Header.Get("Content-Type")
		mu.Unlock()
		w.WriteHeader(204)
	}
	c := startUnix(t, f)

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	if err := c.WriteFile(context.Background(), "web", "/data/big.bin", 0o600, &patternReader{left: size}); err != nil {
		t.Fatalf("WriteFile: %v", err)
	}
	runtime.ReadMemStats(&after)

	mu.Lock()
	defer mu.Unlock()
	if got.n != size || string(got.sum) != string(want.Sum(nil)) {
		t.Fatalf("dend received %d bytes (checksum match %v), want %d", got.n, string(got.sum) == string(want.Sum(nil)), size)
	}
	if !got.chunked {
		t.Errorf("the body was sent with a length; want a streamed body of unknown length")
	}
	if got.path != "/data/big.bin" || got.mode != "0600" || got.ctype != "application/octet-stream" {
		t.Errorf("query path=%q mode=%q, content type %q", got.path, got.mode, got.ctype)
	}
	t.Logf("allocated %d bytes while sending %d", after.TotalAlloc-before.TotalAlloc, size)
	// Client and fake server together allocated far less than the file:
	// nothing held it whole.
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > size/4 {
		t.Errorf("allocated %d bytes to send %d: the body was buffered", alloc, size)
	}
}

func TestWriteFileErrorBeforeBodyIsRead(t *testing.T) {
	f := newFake(t)
	f.routes["PUT /v1/sandboxes/{name}/files/content"] = func(w http.ResponseWriter, r *http.Request) {
		writeErr(w, 404, "not_found", `directory "/nope" not found`, "")
	}
	c := startUnix(t, f)
	err := c.WriteFile(context.Background(), "web", "/nope/x", 0, &patternReader{left: 1 << 20})
	if !client.IsNotFound(err) {
		t.Fatalf("err = %v, want not found", err)
	}
}

func TestArchiveRoutes(t *testing.T) {
	f := newFake(t)
	var uploaded []byte
	var dir string
	f.routes["PUT /v1/sandboxes/{name}/files/archive"] = func(w http.ResponseWriter, r *http.Request) {
		uploaded, _ = io.ReadAll(r.Body)
		dir = r.URL.Query().Get("path")
		if r.Header.Get("Content-Type") != "application/x-tar" {
			w.WriteHeader(415)
			return
		}
		w.WriteHeader(204)
	}
	f.routes["GET /v1/sandboxes/{name}/files/archive"] = func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-tar")
		_, _ = io.WriteString(w, "tar of "+r.URL.Query().Get("path"))
	}
	c := startUnix(t, f)
	ctx := context.Background()
	if err := c.WriteArchive(ctx, "web", "/srv/app", io.LimitReader(&patternReader{left: 1000}, 1000)); err != nil {
		t.Fatalf("WriteArchive: %v", err)
	}
	if len(uploaded) != 1000 || dir != "/srv/app" {
		t.Errorf("dend got %d bytes into %q", len(uploaded), dir)
	}
	rc, err := c.ReadArchive(ctx, "web", "/srv/app")
	if err != nil {
		t.Fatalf("ReadArchive: %v", err)
	}
	defer rc.Close()
	b, _ := io.ReadAll(rc)
	if string(b) != "tar of /srv/app" {
		t.Errorf("ReadArchive = %q", b)
	}
}

// A download that breaks off says how far it got and, when its sandbox's
// state explains it (dend ends transfers when a sandbox goes to sleep),
// why; never a bare "unexpected EOF".
func TestReadFileBrokenOff(t *testing.T) {
	f := newFake(t)
	f.routes["GET /v1/sandboxes/{name}/files/content"] = func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "1000")
		w.Write(make([]byte, 300))
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler) // cut, as dend does when it ends a transfer
	}
	f.routes["GET /v1/sandboxes/{name}"] = func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, api.Sandbox{Name: r.PathValue("name"), State: api.StatePaused})
	}
	c := startUnix(t, f)
	rc, err := c.ReadFile(context.Background(), "web", "/big")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	n, err := io.Copy(io.Discard, rc)
	want := "reading /big from sandbox web broke off after 300 bytes: the sandbox is paused"
	if n != 300 || err == nil || err.Error() != want || client.Hint(err) == "" {
		t.Fatalf("read %d bytes, then %v (hint %q); want 300 and %q", n, err, client.Hint(err), want)
	}
}
