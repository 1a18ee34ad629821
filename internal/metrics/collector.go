package metrics

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/den-dev/den/internal/sandbox"
)

// sandboxLabels are on every per-sandbox series.
var sandboxLabels = []string{"id", "name", "owner", "image"}

func sandboxDesc(name, help string, extra ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, append(append([]string{}, sandboxLabels...), extra...), nil)
}

// The series, by what they are about.
var (
	descState = sandboxDesc("den_sandbox_state",
		"Always 1, for the sandbox's state (creating, running, paused, hibernated, stopped, error).", "state")
	descSpecCPUs   = sandboxDesc("den_sandbox_spec_cpus", "The CPUs the sandbox may use.")
	descSpecMemory = sandboxDesc("den_sandbox_spec_memory_limit_bytes", "The sandbox's memory limit.")
	descSpecDisk   = sandboxDesc("den_sandbox_spec_disk_limit_bytes", "The sandbox's disk cap (0: none).")
	descCPU        = sandboxDesc("den_sandbox_cpu_usage_seconds_total",
		"CPU time the sandbox's current instance used, as the host counts it (gVisor's own included).")
	descMemUsage = sandboxDesc("den_sandbox_memory_usage_bytes",
		"Host memory charged to the sandbox, gVisor's own and page cache included.")
	descMemWorking = sandboxDesc("den_sandbox_memory_working_set_bytes",
		"Host memory charged to the sandbox less inactive page cache, as cAdvisor counts a working set.")
	descTasks = sandboxDesc("den_sandbox_host_tasks",
		"Host tasks (threads) in the sandbox's cgroup: gVisor's sentry and gofer, not the processes inside it.")
	descProcs = sandboxDesc("den_sandbox_processes",
		"Processes running inside the sandbox, den-init included, as den-init counts them (read every 30 s or so).")
	descLimitChecks = sandboxDesc("den_sandbox_limit_checks_total",
		"Times den-init woke inside the sandbox to check its memory and process limits (read every 30 s or so): each wakes the sandbox. dend turns the checks off while it watches a quiet sandbox from the host.")
	descInitReadAt = sandboxDesc("den_sandbox_init_read_timestamp_seconds",
		"When den-init last told the processes and limit checks of the sandbox (Unix time).")
	descDisk = sandboxDesc("den_sandbox_fs_usage_bytes",
		"Bytes the sandbox's files hold, as the storage pool counts them (read every 30 s or so).")
	descRx = sandboxDesc("den_sandbox_network_receive_bytes_total",
		"Bytes the sandbox received, counted on the host end of its link.")
	descTx = sandboxDesc("den_sandbox_network_transmit_bytes_total",
		"Bytes the sandbox sent, counted on the host end of its link.")
	descReadAt = sandboxDesc("den_sandbox_sampled_timestamp_seconds",
		"When the usage figures of the sandbox were read (Unix time); they are at most one sampling interval old.")

	descSandboxes = prometheus.NewDesc("den_sandboxes", "This node's sandboxes, by state.", []string{"state"}, nil)

	descPoolSize     = prometheus.NewDesc("den_pool_size_bytes", "What the storage pool can hold.", nil, nil)
	descPoolUsed     = prometheus.NewDesc("den_pool_used_bytes", "What the storage pool holds.", nil, nil)
	descPoolFree     = prometheus.NewDesc("den_pool_free_bytes", "What can still be written to the storage pool.", nil, nil)
	descPoolReserve  = prometheus.NewDesc("den_pool_reserve_bytes", "Of the pool, kept for den's checkpoints and hibernations.", nil, nil)
	descPoolPromised = prometheus.NewDesc("den_pool_promised_bytes", "Sandboxes' disk caps added up.", nil, nil)

	descWarmReady    = prometheus.NewDesc("den_warm_instances", "Warm instances ready to be claimed.", nil, nil)
	descWarmBooting  = prometheus.NewDesc("den_warm_booting", "Warm instances booting.", nil, nil)
	descWarmMemory   = prometheus.NewDesc("den_warm_host_memory_bytes", "Host memory the warm instances hold (proportional set size).", nil, nil)
	descWarmReserve  = prometheus.NewDesc("den_warm_reserve_bytes", "Host memory warm pools leave available.", nil, nil)
	descWarmPressure = prometheus.NewDesc("den_warm_pressure", "1 when available host memory is under the reserve: pools shrink and do not refill.", nil, nil)
	descScrapeError  = prometheus.NewDesc("den_scrape_error", "1 when this scrape could not read a part of the figures (see dend's log).", []string{"part"}, nil)
)

// states are the states den_sandboxes always reports, 0 or not.
var states = []sandbox.State{sandbox.StateCreating, sandbox.StateRunning, sandbox.StatePaused,
	sandbox.StateHibernated, sandbox.StateStopped, sandbox.StateError}

// collector reads a Source at each scrape.
type collector struct {
	src Source
	log interface {
		Warn(msg string, args ...any)
	}
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descState, descSpecCPUs, descSpecMemory, descSpecDisk, descCPU, descMemUsage,
		descMemWorking, descTasks, descProcs, descLimitChecks, descInitReadAt, descDisk, descRx, descTx, descReadAt, descSandboxes, descPoolSize, descPoolUsed,
		descPoolFree, descPoolReserve, descPoolPromised, descWarmReady, descWarmBooting, descWarmMemory,
		descWarmReserve, descWarmPressure, descScrapeError} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	failed := func(part string, err error) {
		c.log.Warn("reading metrics", "part", part, "err", err)
		ch <- prometheus.MustNewConstMetric(descScrapeError, prometheus.GaugeValue, 1, part)
	}
	use, err := c.src.Usage(ctx)
	if err != nil {
		failed("sandboxes", err)
	}
	byState := map[sandbox.State]int{}
	for _, u := range use {
		sb := u.Sandbox
		byState[sb.State]++
		collectSandbox(ch, u, []string{sb.ID, sb.Name, sb.Owner, sb.Spec.Image})
	}
	if err == nil {
		for _, st := range states {
			ch <- prometheus.MustNewConstMetric(descSandboxes, prometheus.GaugeValue, float64(byState[st]), string(st))
		}
	}
	if p, err := c.src.PoolUsage(ctx); err == nil {
		gauge(ch, descPoolSize, float64(p.Size))
		gauge(ch, descPoolUsed, float64(p.Used))
		gauge(ch, descPoolFree, float64(p.Free))
		gauge(ch, descPoolReserve, float64(p.Reserve))
		gauge(ch, descPoolPromised, float64(p.Promised))
	} else {
		failed("pool", err)
	}
	if w := c.src.WarmHealth(ctx); w != nil {
		gauge(ch, descWarmReady, float64(w.Instances))
		gauge(ch, descWarmBooting, float64(w.Booting))
		gauge(ch, descWarmMemory, float64(w.HostMemoryBytes))
		gauge(ch, descWarmReserve, float64(w.ReserveBytes))
		pressure := 0.0
		if w.Pressure {
			pressure = 1
		}
		gauge(ch, descWarmPressure, pressure)
	}
}

// collectSandbox sends one sandbox's series.
func collectSandbox(ch chan<- prometheus.Metric, u sandbox.SandboxUsage, labels []string) {
	sb := u.Sandbox
	with := func(extra ...string) []string { return append(append([]string{}, labels...), extra...) }
	ch <- prometheus.MustNewConstMetric(descState, prometheus.GaugeValue, 1, with(string(sb.State))...)
	ch <- prometheus.MustNewConstMetric(descSpecCPUs, prometheus.GaugeValue, sb.Spec.CPUs, labels...)
	ch <- prometheus.MustNewConstMetric(descSpecMemory, prometheus.GaugeValue, float64(sb.Spec.MemoryBytes), labels...)
	ch <- prometheus.MustNewConstMetric(descSpecDisk, prometheus.GaugeValue, float64(sb.Spec.DiskBytes), labels...)
	l := u.Latest
	if l == nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(descCPU, prometheus.CounterValue, l.CPUTime.Seconds(), labels...)
	ch <- prometheus.MustNewConstMetric(descMemUsage, prometheus.GaugeValue, float64(l.MemoryBytes), labels...)
	ch <- prometheus.MustNewConstMetric(descMemWorking, prometheus.GaugeValue, float64(l.WorkingSetBytes), labels...)
	ch <- prometheus.MustNewConstMetric(descTasks, prometheus.GaugeValue, float64(l.HostTasks), labels...)
	if l.ProcessesRead {
		ch <- prometheus.MustNewConstMetric(descProcs, prometheus.GaugeValue, float64(l.Processes), labels...)
		ch <- prometheus.MustNewConstMetric(descLimitChecks, prometheus.CounterValue, float64(l.LimitChecks), labels...)
		ch <- prometheus.MustNewConstMetric(descInitReadAt, prometheus.GaugeValue, float64(l.ProcessesAt.UnixMilli())/1000, labels...)
	}
	ch <- prometheus.MustNewConstMetric(descDisk, prometheus.GaugeValue, float64(l.DiskBytes), labels...)
	if l.NetworkRead {
		ch <- prometheus.MustNewConstMetric(descRx, prometheus.CounterValue, float64(l.ReceivedBytes), labels...)
		ch <- prometheus.MustNewConstMetric(descTx, prometheus.CounterValue, float64(l.SentBytes), labels...)
	}
	ch <- prometheus.MustNewConstMetric(descReadAt, prometheus.GaugeValue, float64(l.At.UnixMilli())/1000, labels...)
}

func gauge(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v)
}
