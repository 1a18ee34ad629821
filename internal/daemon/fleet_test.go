package daemon

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/den-dev/den/internal/errdefs"
)

func TestFleetConfig(t *testing.T) {
	ok := Default()
	ok.Node, ok.Listen = "node-a", "127.0.0.1:7070"
	// Validate looks for the binaries: any file will do.
	ok.Runsc, ok.Init = os.Args[0], os.Args[0]
	if err := ok.Validate(); err != nil {
		t.Fatalf("a good config: %v", err)
	}
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"empty node", func(c *Config) { c.Node = "" }, "config node"},
		{"node with a slash", func(c *Config) { c.Node = "a/b" }, "config node"},
		{"node too long", func(c *Config) { c.Node = strings.Repeat("n", 64) }, "config node"},
		{"peer without scheme", func(c *Config) { c.PeerURL = "10.0.0.5:7070" }, "config peer-url"},
		{"peer with a path", func(c *Config) { c.PeerURL = "http://10.0.0.5:7070/den" }, "config peer-url"},
		{"peer ftp", func(c *Config) { c.PeerURL = "ftp://10.0.0.5" }, "config peer-url"},
		{"lease too short", func(c *Config) { c.NodeLease = 10 * time.Millisecond }, "config node-lease"},
		{"no boot timeout", func(c *Config) { c.BootTimeout = 0 }, "config boot-timeout"},
	} {
		c := ok
		tc.mod(&c)
		err := c.Validate()
		if !errors.Is(err, errdefs.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want invalid %s", tc.name, err, tc.want)
		}
	}

	c := ok
	if got, err := c.PeerAddress(); err != nil || got != "http://127.0.0.1:7070" {
		t.Errorf("peer address from --listen: %q, %v", got, err)
	}
	c.PeerURL = "https://a.example:8443"
	if got, _ := c.PeerAddress(); got != "https://a.example:8443" {
		t.Errorf("peer address given: %q", got)
	}
	c = ok
	c.Listen = "0.0.0.0:7070"
	host, _ := os.Hostname()
	if got, err := c.PeerAddress(); err != nil || got != "http://"+host+":7070" {
		t.Errorf("peer address for every address: %q, %v; want the host's name", got, err)
	}
	c.Listen = ""
	if got, err := c.PeerAddress(); got != "" || err != nil {
		t.Errorf("a node without a listener: %q, %v; want none", got, err)
	}
}
