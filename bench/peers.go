package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/den-dev/den/api"
)

// peerReads is how many open+read+close of one small file each batch
// times inside the reader.
const peerReads = 4000

// peerViews times, in one run, what views cost a reader that keeps
// running: `den peer refresh` of a snapshot view (a new snapshot placed
// while the reader runs), and reading a small file through a snapshot
// view and through a live view, beside reading one in the reader's own
// root. Reads are the shell's own `read < FILE` (open, read, close; no
// process started), timed inside the sandbox per batch of 2000.
func (b *bench) peerViews() error {
	off := "0"
	pol := &api.Policy{PauseAfter: &off, HibernateAfter: &off, TTL: &off}
	for _, name := range []string{"pv-coder", "pv-reader"} {
		if _, err := b.d.c.CreateSandbox(b.ctx, api.CreateSandboxRequest{Name: name, Image: "busybox", Memory: "256M", Policy: pol}); err != nil {
			return err
		}
	}
	const file = "mkdir -p /work && echo 'one line of text' > /work/f.txt && sync"
	for _, name := range []string{"pv-coder", "pv-reader"} {
		if _, err := b.exec(name, "sh", "-c", file); err != nil {
			return err
		}
	}
	if _, err := b.d.c.AddPeer(b.ctx, "pv-reader", api.AddPeerRequest{Sandbox: "pv-coder"}); err != nil {
		return err
	}
	if _, err := b.d.c.AddPeer(b.ctx, "pv-reader", api.AddPeerRequest{Sandbox: "pv-coder", Live: true, At: "/peers/live"}); err != nil {
		return err
	}
	// A view placed outside /peers is bound in place by den-init.
	if _, err := b.d.c.AddPeer(b.ctx, "pv-reader", api.AddPeerRequest{Sandbox: "pv-coder", At: "/review/base"}); err != nil {
		return err
	}
	refresh, err := b.timeRefreshes("/peers/pv-coder")
	if err != nil {
		return err
	}
	refreshAt, err := b.timeRefreshes("/review/base")
	if err != nil {
		return err
	}
	reads := map[string]samples{}
	paths := []string{"/work/f.txt", "/peers/pv-coder/work/f.txt", "/peers/live/work/f.txt", "/review/base/work/f.txt"}
	for i := 0; i < b.n+1; i++ {
		for _, p := range paths {
			d, err := b.timeReads("pv-reader", p)
			if err != nil {
				return err
			}
			if i > 0 {
				reads[p] = append(reads[p], d)
			}
		}
	}
	for _, name := range []string{"pv-reader", "pv-coder"} {
		if err := b.d.c.RemoveSandbox(b.ctx, name, true); err != nil {
			return err
		}
	}
	own := reads[paths[0]]
	b.add(section{title: "peer views (busybox reader that keeps running; reads: open+read+close of a 17-byte file)", rows: []row{
		{op: "den peer refresh (snapshot view, reader running)", den: refresh, note: "a read-only snapshot of the peer's root, mounted in place of the old one"},
		{op: "den peer refresh (snapshot view at /review/base)", den: refreshAt, raw: refresh, note: joinNotes("bound again inside the reader by den-init; raw: a view at /peers", ratio(refreshAt, refresh))},
		{op: "read in the reader's own root", den: own, note: "per read"},
		{op: "read through a snapshot view", den: reads[paths[1]], raw: own, note: joinNotes("per read; raw: own root", ratio(reads[paths[1]], own))},
		{op: "read through a live view", den: reads[paths[2]], raw: own, note: joinNotes("per read; raw: own root", ratio(reads[paths[2]], own))},
		{op: "read through a snapshot view at /review/base", den: reads[paths[3]], raw: own, note: joinNotes("per read; raw: own root", ratio(reads[paths[3]], own))},
	}})
	return nil
}

// timeRefreshes times b.n refreshes of pv-reader's view at, after one
// that warms the cache.
func (b *bench) timeRefreshes(at string) (samples, error) {
	var out samples
	for i := 0; i < b.n+1; i++ {
		t0 := time.Now()
		if _, err := b.d.c.RefreshPeer(b.ctx, "pv-reader", at, api.RefreshPeerRequest{}); err != nil {
			return nil, err
		}
		if i > 0 {
			out = append(out, time.Since(t0))
		}
	}
	return out, nil
}

// timeReads times peerReads reads of path in sandbox name, inside it,
// and returns the time of one.
func (b *bench) timeReads(name, path string) (time.Duration, error) {
	// busybox's date has no %N: the sandbox's uptime, to the hundredth
	// of a second, over enough reads to make that fine.
	script := fmt.Sprintf(`read t0 x < /proc/uptime; i=0; while [ $i -lt %d ]; do read -r x < %s; i=$((i+1)); done; read t1 x < /proc/uptime; awk -v a=$t0 -v b=$t1 'BEGIN { printf "%%.0f\n", (b-a)*1e9 }'`, peerReads, path)
	out, err := b.exec(name, "sh", "-c", script)
	if err != nil {
		return 0, err
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(out), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("timing reads of %s: %q: %w", path, out, err)
	}
	return time.Duration(ns / peerReads), nil
}
