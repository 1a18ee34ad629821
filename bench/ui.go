package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/den-dev/den/api"
)

// The ui step: what the dashboard's sandboxes page costs dend with
// uiSandboxes sandboxes, measured uiRounds times.
const (
	uiSandboxes = 500
	uiRunning   = 8 // left running; the rest are stopped (each holds a network slot all the same)
	uiWorkers   = 4
	uiRounds    = 40
)

// uiFiles is what a browser fetches to show the page (index.html names
// the stylesheets and app.js, which imports the rest).
var uiFiles = []string{"/ui/", "/ui/style.css", "/ui/vendor/xterm/xterm.css", "/ui/app.js", "/ui/dom.js", "/ui/parts.js",
	"/ui/api.js", "/ui/sandbox.js", "/ui/runs.js", "/ui/files.js", "/ui/checkpoints.js", "/ui/terminal.js",
	"/ui/vendor/xterm/xterm.mjs", "/ui/vendor/xterm/addon-fit.mjs"}

// dashboardList measures the sandboxes page with uiSandboxes sandboxes
// on a dend of its own (its --subnet wide enough for them): the page's
// files, and the list it polls, GET /v1/sandboxes with a token over TCP
// as the browser calls it, beside the same call through the Go client on
// the unix socket. Times are round trips on loopback, the server's time
// plus next to nothing; reading the answer is included, decoding the
// JSON only in the client's row.
func (b *bench) dashboardList() error {
	// A pool (a sparse file) whose disk caps hold 500 of the smallest.
	d, err := startDendWith(b.bin, filepath.Join(b.work, "ui"), b.uiSubnet, nil, "--pool-size", "24G")
	if err != nil {
		return err
	}
	defer d.close()
	defer removeAll(b.ctx, d)
	if _, err := d.c.BuildImage(b.ctx, api.BuildImageRequest{Name: "busybox"}, nil); err != nil {
		return fmt.Errorf("building busybox: %w", err)
	}
	start := time.Now()
	if err := makeMany(b.ctx, d); err != nil {
		log := d.log.String()
		return fmt.Errorf("%w; dend's log ends:\n%s", err, log[max(0, len(log)-3000):])
	}
	made := time.Since(start)
	tok, err := os.ReadFile(filepath.Join(d.dataDir, "token"))
	if err != nil {
		return fmt.Errorf("reading the admin token: %w", err)
	}
	token := strings.TrimSpace(string(tok))
	hc := &http.Client{Timeout: 30 * time.Second}
	base := "http://" + d.listen

	var page, list, socket samples
	var listBytes int64
	for i := 0; i < uiRounds; i++ {
		el, err := timed(func() error {
			for _, f := range uiFiles {
				if _, err := getAll(hc, base+f, ""); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		page = append(page, el)
		el, err = timed(func() error {
			n, err := getAll(hc, base+"/v1/sandboxes", token)
			listBytes = n
			return err
		})
		if err != nil {
			return err
		}
		list = append(list, el)
		el, err = timed(func() error {
			sbs, err := d.c.ListSandboxes(b.ctx)
			if err == nil && len(sbs) != uiSandboxes {
				err = fmt.Errorf("listed %d sandboxes, want %d", len(sbs), uiSandboxes)
			}
			return err
		})
		if err != nil {
			return err
		}
		socket = append(socket, el)
	}
	b.add(section{title: fmt.Sprintf("dashboard: the sandboxes page with %d sandboxes (%d running, the rest stopped)", uiSandboxes, uiRunning),
		rows: []row{
			{op: fmt.Sprintf("the page's %d files (HTML, CSS, JS), one after another", len(uiFiles)), den: page},
			{op: "GET /v1/sandboxes as the page polls it (TCP, token)", den: list, goal: "≤ 200 ms",
				note: fmt.Sprintf("%.0f KiB of JSON", float64(listBytes)/1024)},
			{op: "den's Go client ListSandboxes (socket, JSON decoded)", den: socket},
		},
		lines: []string{
			fmt.Sprintf("the page's server time, files + list, p50: %s (goal ≤ 200 ms); later polls fetch only the list, and the files answer 304",
				ms(page.pct(0.5)+list.pct(0.5))),
			fmt.Sprintf("making the %d sandboxes took %s (%d at a time)", uiSandboxes, made.Round(time.Second), uiWorkers),
		}})
	return nil
}

// getAll GETs url, with token as a bearer token when set, reads the whole
// answer and returns its length.
func getAll(hc *http.Client, url, token string) (int64, error) {
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		return 0, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return n, err
}

// makeMany creates uiSandboxes small sandboxes, uiWorkers at a time, and
// stops all but uiRunning of them.
func makeMany(ctx context.Context, d *benchDend) error {
	off := "0"
	names := make(chan int)
	errs := make(chan error, uiWorkers)
	var wg sync.WaitGroup
	for w := 0; w < uiWorkers; w++ {
		wg.Go(func() {
			for i := range names {
				name := "ui" + strconv.Itoa(i)
				var err error
				// A create can fail when the host's address list changes
				// under dend's netlink dump (other dends on the machine
				// making sandboxes); a failed create leaves nothing, so
				// try again.
				for try := 0; try < 3; try++ {
					_, err = d.c.CreateSandbox(ctx, api.CreateSandboxRequest{Name: name, Image: "busybox", Memory: "64M", Disk: "64M",
						Network: &api.NetworkPolicy{Mode: "none"}, Policy: &api.Policy{PauseAfter: &off, HibernateAfter: &off, TTL: &off}})
					if err == nil || !strings.Contains(err.Error(), "internal error") {
						break
					}
				}
				if err == nil && i >= uiRunning {
					_, err = d.c.StopSandbox(ctx, name)
				}
				if err != nil {
					errs <- fmt.Errorf("sandbox %d of %d: %w", i+1, uiSandboxes, err)
					return
				}
			}
		})
	}
	var err error
feed:
	for i := 0; i < uiSandboxes; i++ {
		select {
		case names <- i:
		case err = <-errs:
			break feed
		}
	}
	close(names)
	wg.Wait()
	if err == nil {
		select {
		case err = <-errs:
		default:
		}
	}
	return err
}

// removeAll removes d's sandboxes, uiWorkers at a time.
func removeAll(ctx context.Context, d *benchDend) {
	sbs, err := d.c.ListSandboxes(ctx)
	if err != nil {
		return
	}
	names := make(chan string)
	var wg sync.WaitGroup
	for w := 0; w < uiWorkers; w++ {
		wg.Go(func() {
			for n := range names {
				d.c.RemoveSandbox(ctx, n, true)
			}
		})
	}
	for _, sb := range sbs {
		names <- sb.Name
	}
	close(names)
	wg.Wait()
}
