// Package metrics serves dend's Prometheus metrics: per sandbox (named
// after cAdvisor's container_* series, with a den_sandbox_ prefix), per
// node (sandboxes by state, the storage pool, the warm pools) and the
// latency of each lifecycle verb. It keeps a registry of its own, never
// Prometheus' global one.
//
// A scrape reads no cgroup and wakes no sandbox: per-sandbox figures are
// what the Service's sampler last read (every few seconds, running
// sandboxes only), so a scrape costs one listing of the store and the
// encoding, however many sandboxes there are. Stopped and hibernated
// sandboxes have a state series and their limits, no usage: they hold
// no process.
package metrics

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/sandbox"
	"github.com/den-dev/den/internal/warm"
)

// Source is what the metrics are read from: the sampler's readings
// (internal/sampling) beside the core's pool and warm pools.
type Source interface {
	// Usage is this node's sandboxes with their newest readings.
	Usage(ctx context.Context) ([]sandbox.SandboxUsage, error)
	PoolUsage(ctx context.Context) (sandbox.PoolUsage, error)
	// WarmHealth is nil when the node keeps no warm pools.
	WarmHealth(ctx context.Context) *warm.Health
}

// scrapeTimeout bounds what one scrape waits for the store.
const scrapeTimeout = 10 * time.Second

// Metrics is dend's registry: the verb histograms it is told of, and the
// figures it reads from a Source at each scrape.
type Metrics struct {
	reg   *prometheus.Registry
	verbs *prometheus.HistogramVec
	log   *slog.Logger
}

// New returns the registry, with Go's and the process's own metrics and
// den_build_info for version and runscVersion.
func New(version, runscVersion string, log *slog.Logger) *Metrics {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		log: log,
		verbs: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "den_lifecycle_duration_seconds",
			Help: "How long lifecycle verbs took, by verb and result (ok, or the class of the error).",
			// 1 ms to about 65 s: pause takes milliseconds, a cold
			// create or a large checkpoint seconds.
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 17),
		}, []string{"verb", "result"}),
	}
	build := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "den_build_info",
		Help:        "Always 1: the versions of dend and of the runsc it drives.",
		ConstLabels: prometheus.Labels{"version": version, "runsc_version": runscVersion},
	})
	build.Set(1)
	m.reg.MustRegister(m.verbs, build,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Watch reads the per-sandbox and per-node figures from src at each
// scrape.
func (m *Metrics) Watch(src Source) error {
	return m.reg.Register(&collector{src: src, log: m.log})
}

// ObserveVerb records one verb's latency; it makes Metrics a
// sandbox.VerbObserver.
func (m *Metrics) ObserveVerb(verb string, took time.Duration, err error) {
	m.verbs.WithLabelValues(verb, Result(err)).Observe(took.Seconds())
}

var _ sandbox.VerbObserver = (*Metrics)(nil)

// Result is the result label of a verb that ended with err.
func Result(err error) string {
	if err == nil {
		return "ok"
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return "canceled"
	}
	switch errdefs.Class(err) {
	case errdefs.ErrInvalid:
		return "invalid"
	case errdefs.ErrNotFound:
		return "not_found"
	case errdefs.ErrConflict:
		return "conflict"
	case errdefs.ErrTooLarge:
		return "too_large"
	case errdefs.ErrUnavailable:
		return "unavailable"
	case errdefs.ErrQuota:
		return "quota"
	}
	return "internal"
}

// Handler serves the registry in Prometheus' text format (or
// OpenMetrics, when asked).
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		ErrorLog:          slog.NewLogLogger(m.log.Handler(), slog.LevelWarn),
		ErrorHandling:     promhttp.ContinueOnError,
		EnableOpenMetrics: true,
	})
}

// Gatherer is the registry, for tests.
func (m *Metrics) Gatherer() prometheus.Gatherer { return m.reg }
