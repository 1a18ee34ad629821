// Package ui is den's web dashboard: static pages embedded in dend and
// served at /ui on its listeners. It holds no data and takes no token
// itself: the pages sign in with an API token kept in the browser's
// sessionStorage and call dend's own API with it (the exec WebSocket
// takes it as a subprotocol, see api/stream.go), so the API's rules
// (scopes, owner scoping, audit) are the dashboard's rules. Every value
// the pages show is put in the page as text, never parsed as HTML.
package ui

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:embed static
var static embed.FS

// Prefix is the path the dashboard is served under.
const Prefix = "/ui"

// contentSecurityPolicy lets the pages load only dend's own files and
// talk only to dend. xterm.js sets inline styles, hence 'unsafe-inline'
// for styles alone; no inline script runs.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; " +
	"img-src 'self' data: blob:; font-src 'self'; connect-src 'self'; " +
	"frame-ancestors 'none'; base-uri 'none'; form-action 'none'"

// file is one embedded file, ready to serve.
type file struct {
	body  []byte
	ctype string
	etag  string
}

// Handler serves the dashboard: Prefix redirects to Prefix/, which is the
// app's page; the other paths are its scripts, styles and vendored
// libraries.
func Handler() http.Handler {
	files := map[string]file{}
	root, _ := fs.Sub(static, "static")
	// The embedded tree is fixed at build time; walking it cannot fail.
	_ = fs.WalkDir(root, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(root, p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		files["/"+p] = file{body: b, ctype: contentType(p), etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		return nil
	})
	files["/"] = files["/index.html"]
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			h.Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		if r.URL.Path == Prefix {
			http.Redirect(w, r, Prefix+"/", http.StatusMovedPermanently)
			return
		}
		f, ok := files[strings.TrimPrefix(r.URL.Path, Prefix)]
		if !ok {
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
		h.Set("Content-Type", f.ctype)
		h.Set("ETag", f.etag)
		// Revalidate every time: a new dend may serve new files under
		// the same names, and a 304 costs next to nothing.
		h.Set("Cache-Control", "no-cache")
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(f.body))
	})
}

func contentType(p string) string {
	switch path.Ext(p) {
	case ".mjs", ".js":
		return "text/javascript; charset=utf-8"
	case ".md", "":
		return "text/plain; charset=utf-8"
	}
	if t := mime.TypeByExtension(path.Ext(p)); t != "" {
		return t
	}
	return "application/octet-stream"
}
