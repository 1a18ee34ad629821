package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/den-dev/den/api"
)

// ExposePort has dend serve a port of the sandbox: HTTP and WebSocket
// requests to /v1/sandboxes/NAME/ports/PORT/proxy/... (and to
// PORT-NAME.DOMAIN when dend has a ports domain) go on to that port of
// the sandbox, waking it if it sleeps. A private port needs a token that
// reaches the sandbox, or a URL from PortURL; public opens it to anyone who
// can reach dend. Exposing it again only changes public.
//
//	sb, err := c.ExposePort(ctx, "web", 8080, false)
func (c *Client) ExposePort(ctx context.Context, name string, port uint16, public bool) (*api.Sandbox, error) {
	return c.sandboxCall(ctx, http.MethodPut, portPath(name, port), api.ExposePortRequest{Public: public})
}

// UnexposePort stops serving a port of the sandbox; a port that is not
// exposed is ErrNotFound.
func (c *Client) UnexposePort(ctx context.Context, name string, port uint16) error {
	return c.do(ctx, http.MethodDelete, portPath(name, port), nil, nil, nil)
}

// RevokePortURLs ends every signed link to an exposed port made so far;
// links asked for afterwards work.
func (c *Client) RevokePortURLs(ctx context.Context, name string, port uint16) error {
	return c.do(ctx, http.MethodDelete, portPath(name, port)+"/url", nil, nil, nil)
}

// PortURL asks dend for a link to an exposed port that works without a
// token until it expires (expires 0: dend's default, an hour). URL is
// set when dend has a ports domain; otherwise, over TCP, it is Path under
// the client's own dend address, and over the unix socket it is left
// empty: Path is then relative to wherever dend is reachable.
func (c *Client) PortURL(ctx context.Context, name string, port uint16, expires time.Duration) (*api.PortURL, error) {
	var q url.Values
	if expires != 0 {
		q = url.Values{"expires": {expires.String()}}
	}
	var u api.PortURL
	if err := c.do(ctx, http.MethodGet, portPath(name, port)+"/url", q, nil, &u); err != nil {
		return nil, err
	}
	if u.URL == "" && c.socket == "" && strings.HasPrefix(u.Path, "/"+api.Version+"/") {
		u.URL = c.base.Scheme + "://" + c.base.Host + c.base.EscapedPath() + u.Path
	}
	return &u, nil
}

func portPath(name string, port uint16) string {
	return sandboxPath(name, "ports", strconv.FormatUint(uint64(port), 10))
}
