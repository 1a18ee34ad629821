package e2b

import (
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/den-dev/den/internal/inproc"
)

// An upload's X-Metadata-* headers become user.e2b.* attributes, keys
// lowercased; a file's user.e2b.* attributes come back as its metadata,
// and no other attribute does.
func TestFileMetadata(t *testing.T) {
	h := http.Header{}
	h.Set("X-Metadata-Owner", "alice")
	h.Set("x-metadata-build.id", "42")
	h.Set("X-Metadata-", "no key")
	h.Set("Content-Type", "text/plain")
	md := uploadMetadata(h)
	if want := map[string]string{"owner": "alice", "build.id": "42"}; !maps.Equal(md, want) {
		t.Fatalf("metadata of %v = %v, want %v", h, md, want)
	}
	xattrs := xattrsOf(md)
	if want := map[string]string{"user.e2b.owner": "alice", "user.e2b.build.id": "42"}; !maps.Equal(xattrs, want) {
		t.Fatalf("xattrs = %v", xattrs)
	}
	xattrs["user.other"] = "not E2B's"
	if got := metadataOf(xattrs); !maps.Equal(got, md) {
		t.Errorf("metadata of %v = %v, want %v", xattrs, got, md)
	}
	if uploadMetadata(http.Header{}) != nil || xattrsOf(nil) != nil || metadataOf(map[string]string{"user.x": "1"}) != nil {
		t.Error("no metadata should be nil, which the SDK reads as none")
	}
}

// Browsers may call both planes from any origin: preflights are
// answered, answers carry the headers a page may read; a sandbox's own
// servers answer their own preflights.
func TestCORS(t *testing.T) {
	d := New(Config{API: inproc.New()})
	for _, c := range []struct {
		path, host, askHeaders string
		claimed, answered      bool
	}{
		{"/v2/sandboxes", "", "x-api-key,content-type", true, true},
		{"/process.Process/Start", "", "content-type,e2b-sandbox-id,x-access-token", true, true},
		{"/process.Process/Start", "", "content-type", false, false},
		{"/files", "49983-abc.e2b.localhost", "x-access-token", true, true},
		{"/app", "8000-abc.e2b.localhost", "content-type", true, false},
	} {
		r := httptest.NewRequest("OPTIONS", c.path, nil)
		if c.host != "" {
			r.Host = c.host
		}
		r.Header.Set("Origin", "https://app.example")
		r.Header.Set("Access-Control-Request-Method", "POST")
		r.Header.Set("Access-Control-Request-Headers", c.askHeaders)
		if got := d.Claims(r); got != c.claimed {
			t.Errorf("%s %s: claimed %v", c.host, c.path, got)
			continue
		}
		if !c.claimed {
			continue
		}
		w := httptest.NewRecorder()
		if c.answered {
			d.ServeHTTP(w, r)
			if w.Code != 204 || w.Header().Get("Access-Control-Allow-Origin") != "*" || w.Header().Get("Access-Control-Allow-Headers") != c.askHeaders {
				t.Errorf("preflight of %s %s: %d %v", c.host, c.path, w.Code, w.Header())
			}
		}
	}
	r := httptest.NewRequest("GET", "/v2/sandboxes", nil)
	r.Header.Set("Origin", "https://app.example")
	w := httptest.NewRecorder()
	d.ServeHTTP(w, r)
	if w.Code != 401 || w.Header().Get("Access-Control-Allow-Origin") != "*" || !strings.Contains(w.Header().Get("Access-Control-Expose-Headers"), "X-Next-Token") {
		t.Errorf("a browser's call without a key: %d %v", w.Code, w.Header())
	}
}
