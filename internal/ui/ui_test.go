package ui

import (
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

func get(t *testing.T, h http.Handler, method, path string, hdr map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, path, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func TestHandler(t *testing.T) {
	h := Handler()
	for _, tt := range []struct {
		method, path string
		status       int
		ctype        string
		body         string
	}{
		{"GET", "/ui", http.StatusMovedPermanently, "", ""},
		{"GET", "/ui/", http.StatusOK, "text/html; charset=utf-8", `<script type="module" src="/ui/app.js">`},
		{"HEAD", "/ui/", http.StatusOK, "text/html; charset=utf-8", ""},
		{"GET", "/ui/app.js", http.StatusOK, "text/javascript; charset=utf-8", "sandboxPage"},
		{"GET", "/ui/vendor/xterm/xterm.mjs", http.StatusOK, "text/javascript; charset=utf-8", "export{"},
		{"GET", "/ui/vendor/xterm/xterm.css", http.StatusOK, "text/css; charset=utf-8", ".xterm"},
		{"GET", "/ui/vendor/xterm/LICENSE", http.StatusOK, "text/plain; charset=utf-8", "MIT"},
		{"GET", "/ui/nope.js", http.StatusNotFound, "", ""},
		{"GET", "/ui/vendor/", http.StatusNotFound, "", ""}, // no directory listings
		{"GET", "/ui/../go.mod", http.StatusNotFound, "", ""},
		{"POST", "/ui/", http.StatusMethodNotAllowed, "", ""},
	} {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			rec := get(t, h, tt.method, tt.path, nil)
			if rec.Code != tt.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, tt.status, rec.Body)
			}
			if got := rec.Header().Get("Content-Security-Policy"); got != contentSecurityPolicy {
				t.Errorf("CSP %q", got)
			}
			for k, want := range map[string]string{"X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer"} {
				if got := rec.Header().Get(k); got != want {
					t.Errorf("%s: %q, want %q", k, got, want)
				}
			}
			if tt.ctype != "" && rec.Header().Get("Content-Type") != tt.ctype {
				t.Errorf("content type %q, want %q", rec.Header().Get("Content-Type"), tt.ctype)
			}
			if !strings.Contains(rec.Body.String(), tt.body) {
				t.Errorf("body lacks %q", tt.body)
			}
			if tt.status == http.StatusMovedPermanently && rec.Header().Get("Location") != "/ui/" {
				t.Errorf("redirect to %q", rec.Header().Get("Location"))
			}
		})
	}
}

// A browser holding a file revalidates it with its ETag and gets a 304.
func TestHandlerRevalidates(t *testing.T) {
	h := Handler()
	first := get(t, h, "GET", "/ui/app.js", nil)
	etag := first.Header().Get("ETag")
	if etag == "" || first.Header().Get("Cache-Control") != "no-cache" {
		t.Fatalf("ETag %q, Cache-Control %q", etag, first.Header().Get("Cache-Control"))
	}
	if rec := get(t, h, "GET", "/ui/app.js", map[string]string{"If-None-Match": etag}); rec.Code != http.StatusNotModified {
		t.Errorf("revalidation: %d", rec.Code)
	}
}

// The pages put values into the document as text only: no script may
// parse a string as HTML. (The vendored xterm.js is its own.)
func TestNoHTMLFromStrings(t *testing.T) {
	sinks := regexp.MustCompile(`\.innerHTML|\.outerHTML|insertAdjacentHTML|document\.write|createContextualFragment|DOMParser|eval\(|new Function`)
	for name, body := range scripts(t) {
		if loc := sinks.FindStringIndex(body); loc != nil {
			t.Errorf("%s: %q parses a string as HTML or code", name, body[loc[0]:loc[1]])
		}
	}
}

// Every module a page imports is embedded: a missing file would break
// the dashboard only in a browser.
func TestImportsResolve(t *testing.T) {
	h := Handler()
	imports := regexp.MustCompile(`(?m)^import .* from '\./([^']+)';$`)
	for name, body := range scripts(t) {
		for _, m := range imports.FindAllStringSubmatch(body, -1) {
			if rec := get(t, h, "GET", "/ui/"+m[1], nil); rec.Code != http.StatusOK {
				t.Errorf("%s imports %s: %d", name, m[1], rec.Code)
			}
		}
	}
	index := get(t, h, "GET", "/ui/", nil).Body.String()
	for _, m := range regexp.MustCompile(`(?:src|href)="(/ui/[^"]+)"`).FindAllStringSubmatch(index, -1) {
		if rec := get(t, h, "GET", m[1], nil); rec.Code != http.StatusOK {
			t.Errorf("index.html names %s: %d", m[1], rec.Code)
		}
	}
}

// scripts returns den's own scripts by name.
func scripts(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	entries, err := fs.Glob(static, "static/*.js")
	if err != nil || len(entries) < 5 {
		t.Fatalf("scripts: %v %v", entries, err)
	}
	for _, p := range entries {
		b, err := fs.ReadFile(static, p)
		if err != nil {
			t.Fatal(err)
		}
		out[p] = string(b)
	}
	return out
}
