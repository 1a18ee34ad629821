package sampling

import (
	"context"
	"log/slog"
	"time"

	"github.com/den-dev/den/internal/idle"
	"github.com/den-dev/den/internal/sandbox"
)

// Watching limits from the host: while a running sandbox is quiet, dend
// watches its host cgroups, which wakes nothing, and turns den-init's
// limit checks off; idle.LimitChecks decides when, and says why, and
// idle.LimitWatches starts and stops the watches as sandboxes come and
// go. Here a watch is started, from the engine, for a running sandbox.

// WatchLimits looks at every running sandbox of svc every interval until
// the core's Close, when engine can watch from the host
// (sandbox.HostWatcher).
func WatchLimits(svc Sandboxes, engine any, interval time.Duration, log *slog.Logger) {
	hw, ok := engine.(sandbox.HostWatcher)
	if !ok {
		return
	}
	svc.Go(func(ctx context.Context) {
		var watches idle.LimitWatches
		defer watches.StopAll()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			watchLimits(ctx, svc, hw, &watches, interval, log)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	})
}

// watchLimits starts and stops watches as sandboxes come and go, and
// decides for each whether den-init must check.
func watchLimits(ctx context.Context, svc Sandboxes, hw sandbox.HostWatcher, watches *idle.LimitWatches, interval time.Duration, log *slog.Logger) {
	sbs, err := svc.LocalSandboxes(ctx)
	if err != nil {
		log.Warn("watching limits: listing sandboxes", "err", err)
		return
	}
	var running []idle.Watched
	byID := make(map[string]*sandbox.Sandbox)
	for _, sb := range sbs {
		if sb.State != sandbox.StateRunning || sb.Pending != "" {
			continue
		}
		running = append(running, idle.Watched{ID: sb.ID, Instance: sb.InstanceID(), Limit: sb.Spec.MemoryBytes})
		byID[sb.ID] = sb
	}
	watches.Look(ctx, running, func(w idle.Watched) *idle.LimitWatch {
		return startWatch(ctx, svc, hw, byID[w.ID], log)
	}, interval)
}

// startWatch watches sb's instance, or returns nil when it cannot (its
// den-init then keeps checking).
func startWatch(ctx context.Context, svc Sandboxes, hw sandbox.HostWatcher, sb *sandbox.Sandbox, log *slog.Logger) *idle.LimitWatch {
	g, ok := svc.GuestFor(sb).(idle.LimitChecker)
	if !ok {
		return nil
	}
	var threshold int64
	if sb.Spec.MemoryBytes > 0 {
		threshold = idle.MemoryThreshold(sb.Spec.MemoryBytes)
	}
	host, err := hw.WatchHost(sb.InstanceID(), threshold)
	if err != nil {
		log.Debug("watching limits: den-init keeps checking", "sandbox", sb.Name, "err", err)
		return nil
	}
	w := &idle.LimitWatch{Stop: host.Stop, Checks: idle.NewLimitChecks(threshold, g, host)}
	if crossed := host.Crossed(); crossed != nil {
		go func() {
			for range crossed { // until Stop
				w.Checks.Decide(ctx, 0)
			}
		}()
	}
	return w
}
