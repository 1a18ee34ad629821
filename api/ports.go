package api

import "time"

// ExposedPort is a port inside a sandbox that dend serves HTTP and
// WebSocket traffic to, at /v1/sandboxes/{name}/ports/{port}/proxy/ and,
// when dend has a ports domain, at http://PORT-NAME.DOMAIN/. A private
// port (the default) needs a token that reaches the sandbox or a signed
// URL; a public one needs nothing.
type ExposedPort struct {
	Port   uint16 `json:"port"`
	Public bool   `json:"public,omitempty"`
}

// ExposePortRequest is the body of PUT /v1/sandboxes/{name}/ports/{port};
// it may be empty (private).
type ExposePortRequest struct {
	Public bool `json:"public,omitempty"`
}

// PortURL is the body of GET /v1/sandboxes/{name}/ports/{port}/url: a link
// to a private port that works without a token until it expires.
type PortURL struct {
	// Path is the link under dend's own address: the proxy route with
	// the signature in its query.
	Path string `json:"path"`
	// URL is the link on dend's ports domain, when it has one; there the
	// signature is kept in a cookie of that host, so a browser can follow
	// the application's own links. The SDK fills it in from Path when
	// dend has no ports domain and the client talks to dend over TCP.
	URL       string    `json:"url,omitempty"`
	ExpiresAt time.Time `json:"expires_at"`
}

// Query parameters of a signed port URL. dend never passes them on to the
// sandbox.
const (
	PortExpiresParam   = "den_expires"   // Unix time, in seconds, after which the link is refused
	PortSignatureParam = "den_signature" // HMAC-SHA256, base64url, of the sandbox id, port and expiry
)
