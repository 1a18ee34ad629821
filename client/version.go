package client

import (
	"errors"
	"net/http"
	"strings"
	"sync"

	"github.com/den-dev/den/api"
)

// ErrUnknownCall: dend has no such call. It runs an older release than
// this client, from before the call was added; upgrading dend brings it.
// It matches along with its code's class (ErrNotFound, or ErrInvalid for
// a method the path is not served for).
var ErrUnknownCall = errors.New("unknown call")

// unknownCall reports whether e is dend's answer to a call it does not
// have (api.NoRouteMessage, api.NoMethodMessage).
func (e *Error) unknownCall() bool {
	switch e.StatusCode {
	case http.StatusNotFound:
		return strings.HasPrefix(e.API.Message, api.NoRouteMessage)
	case http.StatusMethodNotAllowed:
		return strings.HasPrefix(e.API.Message, api.NoMethodMessage)
	}
	return false
}

// WithServerVersion calls seen once, with the release of den that dend
// names in the first answer naming one (api.VersionHeader), so a caller
// built from another release can warn. dends of v0.1.0 name none: Health
// reports their version.
func WithServerVersion(seen func(version string)) Option {
	return func(c *config) { c.serverVersion = seen }
}

// versionWatch passes the release dend names to its callback, once.
type versionWatch struct {
	once sync.Once
	seen func(version string)
}

// heard hands the release resp names, if it names one, to the callback
// of WithServerVersion.
func (c *Client) heard(resp *http.Response) {
	if c.version == nil || resp == nil {
		return
	}
	if v := resp.Header.Get(api.VersionHeader); v != "" {
		c.version.once.Do(func() { c.version.seen(v) })
	}
}
