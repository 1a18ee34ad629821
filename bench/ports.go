package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/den-dev/den/api"
)

// bigFile is what the throughput figures download.
const bigFile = 64 << 20

// exposedPorts measures requests through an exposed port: the first one
// to a hibernated (and to a paused) sandbox, and the proxy beside a direct
// connection from the host to the sandbox's address, in the same run. The
// server is busybox httpd, which closes every connection after one answer,
// so each request pays for a new connection on both paths.
func (b *bench) exposedPorts() error {
	const name = "ports"
	if err := b.create(name, "256M"); err != nil {
		return err
	}
	defer b.d.c.RemoveSandbox(b.ctx, name, true)
	script := fmt.Sprintf("mkdir -p /www && echo hello > /www/index.html && dd if=/dev/urandom of=/www/big bs=1M count=%d 2>/dev/null", bigFile>>20)
	if _, err := b.exec(name, "sh", "-c", script); err != nil {
		return err
	}
	if _, err := b.d.c.ExecDetached(b.ctx, name, api.ExecRequest{Argv: []string{"busybox", "httpd", "-f", "-p", "8080", "-h", "/www"}}); err != nil {
		return err
	}
	sb, err := b.d.c.ExposePort(b.ctx, name, 8080, false)
	if err != nil {
		return err
	}
	// Through dend's unix socket, as root: the proxy's work is the same
	// whichever listener the request came by.
	proxy := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", filepath.Join(b.work, "den.sock"))
		},
	}}
	direct := &http.Client{Transport: &http.Transport{Proxy: nil}}
	viaProxy := "http://den/v1/sandboxes/" + name + "/ports/8080/proxy/"
	viaDirect := "http://" + net.JoinHostPort(sb.Address, "8080") + "/"
	if err := poll(30*time.Second, "httpd to answer through dend", func() (bool, error) {
		_, err := fetch(b.ctx, proxy, viaProxy+"index.html")
		return err == nil, nil
	}); err != nil {
		return err
	}

	var small, smallDirect samples
	for i := 0; i < b.n*5; i++ {
		for _, p := range []struct {
			c   *http.Client
			url string
			s   *samples
		}{{proxy, viaProxy, &small}, {direct, viaDirect, &smallDirect}} {
			d, err := timed(func() error { _, err := fetch(b.ctx, p.c, p.url+"index.html"); return err })
			if err != nil {
				return err
			}
			*p.s = append(*p.s, d)
		}
	}

	var fromDisk, fromRAM samples
	for i := 0; i < b.n; i++ {
		for _, sleep := range []struct {
			verb func(context.Context, string) (*api.Sandbox, error)
			s    *samples
		}{{b.d.c.Hibernate, &fromDisk}, {b.d.c.Pause, &fromRAM}} {
			if _, err := sleep.verb(b.ctx, name); err != nil {
				return err
			}
			d, err := timed(func() error { _, err := fetch(b.ctx, proxy, viaProxy+"index.html"); return err })
			if err != nil {
				return err
			}
			*sleep.s = append(*sleep.s, d)
		}
	}

	// Throughput: alternate the two paths so that neither gets a warmer
	// machine; keep each one's best.
	var best, bestDirect float64
	for i := 0; i < 3; i++ {
		for _, p := range []struct {
			c    *http.Client
			url  string
			best *float64
		}{{proxy, viaProxy, &best}, {direct, viaDirect, &bestDirect}} {
			var n int64
			d, err := timed(func() (err error) { n, err = fetch(b.ctx, p.c, p.url+"big"); return err })
			if err != nil {
				return err
			}
			if n != bigFile {
				return fmt.Errorf("downloaded %d bytes of %s, want %d", n, p.url+"big", bigFile)
			}
			*p.best = max(*p.best, float64(n)/(1<<20)/d.Seconds())
		}
	}
	b.add(section{title: "exposed ports (busybox httpd on port 8080)", rows: []row{
		{op: "first request, hibernated → served", den: fromDisk,
			note: "Hibernate, then GET of a small file through dend: wakes the sandbox"},
		{op: "first request, paused → served", den: fromRAM, note: "Pause, then the same GET"},
		{op: "GET of a small file", den: small, raw: smallDirect,
			note: joinNotes("raw: a direct connection from the host to the sandbox's address", ratio(small, smallDirect))},
	}, lines: []string{fmt.Sprintf("download of %s, best of 3: through dend %.0f MiB/s, direct %.0f MiB/s (%.0f%% of direct)",
		mib(bigFile), best, bestDirect, 100*best/bestDirect)}})
	return nil
}

// fetch GETs url, reads the whole body, and returns its length; any status
// but 200 is an error.
func fetch(ctx context.Context, c *http.Client, url string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
		return 0, fmt.Errorf("GET %s: %d %s", url, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	return io.Copy(io.Discard, resp.Body)
}
