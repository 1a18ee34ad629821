package e2b

import (
	"net/http"
	"strings"
)

// CORS: E2B's JS SDK also runs in browsers, which call both planes from
// another origin. The planes take their credentials from explicit headers
// (X-API-KEY, X-Access-Token), never from cookies, so any origin may call
// them, as E2B's own API lets it: a page learns nothing it could not with
// the key it already holds. Browsers send no credentials to an origin
// answered with "*". A sandbox's own servers (PORT-ID.DOMAIN) answer
// their preflights themselves.

// corsExposed are the answers' headers a page's script may read.
const corsExposed = "X-Next-Token, Content-Encoding, Content-Length, Connect-Content-Encoding, Grpc-Status, Grpc-Message"

// isPreflight reports whether r is a browser's CORS preflight.
func isPreflight(r *http.Request) bool {
	return r.Method == http.MethodOptions && r.Header.Get("Origin") != "" && r.Header.Get("Access-Control-Request-Method") != ""
}

// preflightForEnvd reports whether r is a preflight of an envd call on
// E2B_SANDBOX_URL, which names its sandbox only in the headers it asks
// leave to send.
func preflightForEnvd(r *http.Request) bool {
	if !isPreflight(r) {
		return false
	}
	for _, h := range strings.Split(r.Header.Get("Access-Control-Request-Headers"), ",") {
		if strings.EqualFold(strings.TrimSpace(h), headerSandboxID) {
			return true
		}
	}
	return false
}

// cors adds CORS headers to an answer of either plane, and answers a
// preflight itself; handled reports that it did.
func cors(w http.ResponseWriter, r *http.Request) (handled bool) {
	if r.Header.Get("Origin") == "" {
		return false
	}
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", "*")
	h.Set("Access-Control-Expose-Headers", corsExposed)
	if !isPreflight(r) {
		return false
	}
	h.Set("Access-Control-Allow-Methods", "GET, POST, PUT, DELETE, OPTIONS")
	if asked := r.Header.Get("Access-Control-Request-Headers"); asked != "" {
		h.Set("Access-Control-Allow-Headers", asked)
	}
	h.Set("Access-Control-Max-Age", "7200")
	w.WriteHeader(http.StatusNoContent)
	return true
}
