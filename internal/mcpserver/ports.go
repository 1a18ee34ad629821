package mcpserver

import (
	"context"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/den-dev/den/client"
)

// PortInput is port_expose's arguments.
type PortInput struct {
	Name   string `json:"name" jsonschema:"the sandbox's name"`
	Port   int    `json:"port" jsonschema:"the TCP port a server listens on inside the sandbox"`
	Public bool   `json:"public,omitempty" jsonschema:"reachable by anyone who can reach den, with no token (default: only through a signed link that expires)"`
	// ExpiresMinutes sizes the signed link of a private port.
	ExpiresMinutes int `json:"expires_minutes,omitempty" jsonschema:"how long a private port's link works (default 60)"`
}

// UnexposeInput is port_unexpose's arguments.
type UnexposeInput struct {
	Name string `json:"name" jsonschema:"the sandbox's name"`
	Port int    `json:"port" jsonschema:"the exposed port"`
}

// Unexposed is port_unexpose's result.
type Unexposed struct {
	Name      string `json:"name"`
	Unexposed int    `json:"unexposed" jsonschema:"the port no longer reachable through den; its links stop working"`
}

// LinkInput is port_link's arguments.
type LinkInput struct {
	Name           string `json:"name" jsonschema:"the sandbox's name"`
	Port           int    `json:"port" jsonschema:"the exposed port"`
	ExpiresMinutes int    `json:"expires_minutes,omitempty" jsonschema:"how long the link works (default 60)"`
}

// Link is a signed link to an exposed port.
type Link struct {
	Port    int       `json:"port"`
	URL     string    `json:"url,omitempty" jsonschema:"open it in a browser or with curl"`
	Path    string    `json:"path" jsonschema:"the URL's path under dend's own address"`
	Expires time.Time `json:"expires"`
}

// LinksRevoked is port_links_revoke's result.
type LinksRevoked struct {
	Name    string `json:"name"`
	Port    int    `json:"port"`
	Revoked bool   `json:"revoked" jsonschema:"every link made so far stopped working; the port stays exposed and port_link makes new ones"`
}

// Exposed is port_expose's result.
type Exposed struct {
	Port    int       `json:"port"`
	Public  bool      `json:"public"`
	URL     string    `json:"url,omitempty" jsonschema:"open it in a browser or with curl"`
	Path    string    `json:"path" jsonschema:"the URL's path under dend's own address"`
	Expires time.Time `json:"expires,omitzero"`
}

// portTools serve a sandbox's ports through den, sign links to them,
// and stop serving them.
func (s *server) portTools(srv *mcp.Server) {
	add(s, srv, &mcp.Tool{
		Name:        "port_expose",
		Title:       "Expose a port",
		Description: "Make a server listening on a port inside a sandbox reachable over HTTP through den, and return its URL.",
		Annotations: changes(false, true),
	}, func(ctx context.Context, c *client.Client, _ *mcp.CallToolRequest, in PortInput) (Exposed, error) {
		port, err := portArg(in.Port)
		if err != nil {
			return Exposed{}, err
		}
		expires, err := linkExpiry(in.ExpiresMinutes)
		if err != nil {
			return Exposed{}, err
		}
		if _, err := c.ExposePort(ctx, in.Name, port, in.Public); err != nil {
			return Exposed{}, err
		}
		l, err := signLink(ctx, c, in.Name, port, expires)
		if err != nil {
			return Exposed{}, err
		}
		out := Exposed{Port: in.Port, Public: in.Public, URL: l.URL, Path: l.Path}
		if !in.Public {
			out.Expires = l.Expires
		}
		return out, nil
	})

	add(s, srv, &mcp.Tool{
		Name:  "port_link",
		Title: "Sign a link to a port",
		Description: "Make a new link to an exposed port that works without a token until it expires: to share it, or to replace links " +
			"port_links_revoke ended.",
		Annotations: changes(false, false),
	}, func(ctx context.Context, c *client.Client, _ *mcp.CallToolRequest, in LinkInput) (Link, error) {
		port, err := portArg(in.Port)
		if err != nil {
			return Link{}, err
		}
		expires, err := linkExpiry(in.ExpiresMinutes)
		if err != nil {
			return Link{}, err
		}
		return signLink(ctx, c, in.Name, port, expires)
	})

	add(s, srv, &mcp.Tool{
		Name:  "port_links_revoke",
		Title: "Revoke a port's links",
		Description: "End every signed link to an exposed port made so far, for instance one that leaked. The port stays exposed; " +
			"port_link signs new links.",
		Annotations: changes(true, true),
	}, func(ctx context.Context, c *client.Client, _ *mcp.CallToolRequest, in UnexposeInput) (LinksRevoked, error) {
		port, err := portArg(in.Port)
		if err != nil {
			return LinksRevoked{}, err
		}
		if err := c.RevokePortURLs(ctx, in.Name, port); err != nil {
			return LinksRevoked{}, err
		}
		return LinksRevoked{Name: in.Name, Port: in.Port, Revoked: true}, nil
	})

	add(s, srv, &mcp.Tool{
		Name:        "port_unexpose",
		Title:       "Stop exposing a port",
		Description: "Stop serving a sandbox's port through den: its URL and every link to it stop working. The server inside keeps running.",
		Annotations: changes(true, true),
	}, func(ctx context.Context, c *client.Client, _ *mcp.CallToolRequest, in UnexposeInput) (Unexposed, error) {
		port, err := portArg(in.Port)
		if err != nil {
			return Unexposed{}, err
		}
		if err := c.UnexposePort(ctx, in.Name, port); err != nil {
			return Unexposed{}, err
		}
		return Unexposed{Name: in.Name, Unexposed: in.Port}, nil
	})
}

// portArg is a tool's port argument as a TCP port.
func portArg(p int) (uint16, error) {
	if p < 1 || p > 65535 {
		return 0, invalid("port %d: give a TCP port from 1 to 65535", p)
	}
	return uint16(p), nil
}

// linkExpiry is how long a link asked for with expires_minutes works
// (0: an hour).
func linkExpiry(minutes int) (time.Duration, error) {
	switch {
	case minutes < 0:
		return 0, invalid("expires_minutes is %d: give a positive number, or leave it out", minutes)
	case minutes == 0:
		return time.Hour, nil
	}
	return time.Duration(minutes) * time.Minute, nil
}

// signLink asks den for a link to an exposed port that works for expires.
func signLink(ctx context.Context, c *client.Client, name string, port uint16, expires time.Duration) (Link, error) {
	u, err := c.PortURL(ctx, name, port, expires)
	if err != nil {
		return Link{}, err
	}
	return Link{Port: int(port), URL: u.URL, Path: u.Path, Expires: u.ExpiresAt}, nil
}
