package daemon

import (
	"context"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/den-dev/den/internal/shutdown"
)

// shutdownHost is the host's shutdown as a hibernation, for this dend.
func shutdownHost(cfg Config, sbs shutdown.Sandboxes, log *slog.Logger) *shutdown.Host {
	return shutdown.New(shutdown.Config{Sandboxes: sbs, File: filepath.Join(cfg.DataDir, "shutdown.json"),
		Logger: log.With("component", "shutdown")})
}

// sleepAtStop does what cfg.OnStop says with the running and paused
// sandboxes of a dend that is stopping: hibernates them, within
// cfg.ShutdownTimeout, when the host is going down (or always), and
// otherwise leaves them running for the next dend.
func sleepAtStop(cfg Config, host *shutdown.Host, hostStopping func(context.Context) bool, log *slog.Logger) {
	switch {
	case cfg.OnStop == OnStopLeave:
		log.Info("dend stopped; sandboxes keep running (--on-stop leave)")
		return
	case cfg.OnStop == OnStopAuto && !hostStopping(context.Background()):
		log.Info("dend stopped; sandboxes keep running for the next dend (the host is not shutting down)")
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	t0 := time.Now()
	log.Info("hibernating every running and paused sandbox before dend stops", "on_stop", cfg.OnStop, "bound", cfg.ShutdownTimeout)
	rep, err := host.HibernateAll(ctx)
	for name, why := range rep.Failed {
		log.Error("could not hibernate a sandbox at shutdown: its processes end with the host, its files stay", "name", name, "err", why)
	}
	if err != nil {
		log.Error("hibernating sandboxes at shutdown", "err", err)
	}
	log.Info("sandboxes hibernated at shutdown", "hibernated", len(rep.Hibernated), "failed", len(rep.Failed),
		"took", time.Since(t0).Round(time.Millisecond))
}

// wakeAtBoot wakes, in the background, the sandboxes the last shutdown
// hibernated whose policy says wake_on_boot.
func wakeAtBoot(ctx context.Context, host *shutdown.Host, log *slog.Logger) {
	go func() {
		woke, err := host.WakeAtBoot(ctx)
		if err != nil {
			log.Error("waking the sandboxes the host shutdown hibernated", "err", err)
		}
		if len(woke) > 0 {
			log.Info("woke the sandboxes the host shutdown hibernated that ask to wake on boot", "sandboxes", woke)
		}
	}()
}
