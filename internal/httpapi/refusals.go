package httpapi

import (
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// Requests refused for want of a valid token are logged, but anyone who
// can reach dend can send them as fast as they like, and must not be able
// to grow dend's log at that rate. refusalLog writes the first few of each
// window in full and counts the rest, which it sums up, by remote
// address, when the next window begins.
type refusalLog struct {
	log *slog.Logger
	now func() time.Time

	mu          sync.Mutex
	windowStart time.Time
	written     int            // refusals logged in full this window
	suppressed  int            // refusals only counted this window
	remotes     map[string]int // suppressed refusals by remote host, at most maxRemotes
	otherHosts  int            // suppressed refusals from hosts past maxRemotes
}

const (
	refusalWindow = time.Minute
	refusalBurst  = 10  // refusals logged in full per window
	maxRemotes    = 256 // remote hosts told apart in a summary
)

func newRefusalLog(log *slog.Logger, now func() time.Time) *refusalLog {
	if now == nil {
		now = time.Now
	}
	return &refusalLog{log: log, now: now, remotes: map[string]int{}}
}

// note records that r was refused with err.
func (l *refusalLog) note(r *http.Request, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if now.Sub(l.windowStart) >= refusalWindow {
		l.summarizeLocked(now)
	}
	if l.written < refusalBurst {
		l.written++
		l.log.Info("refused a request", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr, "err", err)
		if l.written == refusalBurst {
			l.log.Info("refused requests: logging only a count until the minute is out", "window_start", l.windowStart)
		}
		return
	}
	l.suppressed++
	host, _, splitErr := net.SplitHostPort(r.RemoteAddr)
	if splitErr != nil {
		host = r.RemoteAddr
	}
	switch _, seen := l.remotes[host]; {
	case seen || len(l.remotes) < maxRemotes:
		l.remotes[host]++
	default:
		l.otherHosts++
	}
}

// summarizeLocked logs what the window that ends now suppressed, if
// anything, and starts a new one.
func (l *refusalLog) summarizeLocked(now time.Time) {
	if l.suppressed > 0 {
		top, topN := "", 0
		for h, n := range l.remotes {
			if n > topN || (n == topN && h < top) {
				top, topN = h, n
			}
		}
		attrs := []any{"count", l.suppressed, "since", l.windowStart, "remote_hosts", len(l.remotes), "busiest_remote", top, "busiest_count", topN}
		if l.otherHosts > 0 {
			attrs = append(attrs, "from_hosts_not_told_apart", l.otherHosts)
		}
		l.log.Warn("refused requests not logged one by one", attrs...)
	}
	l.windowStart, l.written, l.suppressed, l.otherHosts = now, 0, 0, 0
	clear(l.remotes)
}
