package metrics

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/sandbox"
	"github.com/den-dev/den/internal/usage"
	"github.com/den-dev/den/internal/warm"
)

// fakeSource is a node of three sandboxes: one running, one paused, one
// hibernated, on a pool and with a warm pool.
type fakeSource struct{ err error }

func (f fakeSource) Usage(ctx context.Context) ([]sandbox.SandboxUsage, error) {
	if f.err != nil {
		return nil, f.err
	}
	mk := func(id, name, owner string, st sandbox.State) *sandbox.Sandbox {
		return &sandbox.Sandbox{ID: id, Name: name, Owner: owner, State: st, Generation: 1,
			Spec: sandbox.Spec{Image: "busybox", CPUs: 1, MemoryBytes: 256 << 20}}
	}
	at := time.Unix(1700000000, 0)
	return []sandbox.SandboxUsage{
		{Sandbox: mk("aaaa", "web", "", sandbox.StateRunning), Latest: &usage.Latest{At: at, CPUTime: 1500 * time.Millisecond,
			MemoryBytes: 50 << 20, WorkingSetBytes: 40 << 20, HostTasks: 12, DiskBytes: 4096,
			NetworkRead: true, ReceivedBytes: 100, SentBytes: 200}},
		{Sandbox: mk("bbbb", "db", "alice", sandbox.StatePaused), Latest: &usage.Latest{At: at, CPUTime: time.Second}},
		{Sandbox: mk("cccc", "old", "alice", sandbox.StateHibernated)},
	}, nil
}

func (fakeSource) PoolUsage(ctx context.Context) (sandbox.PoolUsage, error) {
	return sandbox.PoolUsage{Size: 8 << 30, Used: 1 << 30, Free: 7 << 30, Reserve: 512 << 20}, nil
}

func (fakeSource) WarmHealth(ctx context.Context) *warm.Health {
	return &warm.Health{Instances: 2, Booting: 1, HostMemoryBytes: 30 << 20}
}

func newTest(t *testing.T, src Source) *Metrics {
	t.Helper()
	m := New("v1.2.3", "runsc-9", nil)
	if err := m.Watch(src); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestSandboxSeries(t *testing.T) {
	m := newTest(t, fakeSource{})
	want := `
# HELP den_sandbox_cpu_usage_seconds_total CPU time the sandbox's current instance used, as the host counts it (gVisor's own included).
# TYPE den_sandbox_cpu_usage_seconds_total counter
den_sandbox_cpu_usage_seconds_total{id="aaaa",image="busybox",name="web",owner=""} 1.5
den_sandbox_cpu_usage_seconds_total{id="bbbb",image="busybox",name="db",owner="alice"} 1
# HELP den_sandbox_network_transmit_bytes_total Bytes the sandbox sent, counted on the host end of its link.
# TYPE den_sandbox_network_transmit_bytes_total counter
den_sandbox_network_transmit_bytes_total{id="aaaa",image="busybox",name="web",owner=""} 200
# HELP den_sandbox_state Always 1, for the sandbox's state (creating, running, paused, hibernated, stopped, error).
# TYPE den_sandbox_state gauge
den_sandbox_state{id="aaaa",image="busybox",name="web",owner="",state="running"} 1
den_sandbox_state{id="bbbb",image="busybox",name="db",owner="alice",state="paused"} 1
den_sandbox_state{id="cccc",image="busybox",name="old",owner="alice",state="hibernated"} 1
# HELP den_sandboxes This node's sandboxes, by state.
# TYPE den_sandboxes gauge
den_sandboxes{state="creating"} 0
den_sandboxes{state="error"} 0
den_sandboxes{state="hibernated"} 1
den_sandboxes{state="paused"} 1
den_sandboxes{state="running"} 1
den_sandboxes{state="stopped"} 0
# HELP den_warm_instances Warm instances ready to be claimed.
# TYPE den_warm_instances gauge
den_warm_instances 2
`
	err := testutil.GatherAndCompare(m.Gatherer(), strings.NewReader(want),
		"den_sandbox_cpu_usage_seconds_total", "den_sandbox_network_transmit_bytes_total", "den_sandbox_state", "den_sandboxes", "den_warm_instances")
	if err != nil {
		t.Error(err)
	}
	// A hibernated sandbox holds nothing: no usage series, only its state
	// and limits.
	if n := testutil.CollectAndCount(&collector{src: fakeSource{}, log: m.log}, "den_sandbox_memory_working_set_bytes"); n != 2 {
		t.Errorf("%d working-set series, want 2 (running and paused)", n)
	}
}

func TestVerbHistograms(t *testing.T) {
	m := newTest(t, fakeSource{})
	m.ObserveVerb(sandbox.VerbCreate, 80*time.Millisecond, nil)
	m.ObserveVerb(sandbox.VerbCreate, 90*time.Millisecond, nil)
	m.ObserveVerb(sandbox.VerbPause, time.Millisecond, errdefs.Conflict("sandbox %q cannot go from stopped to paused", "x"))
	m.ObserveVerb(sandbox.VerbExec, time.Millisecond, context.Canceled)
	tests := []struct {
		verb, result string
		count        int
	}{
		{"create", "ok", 2}, {"pause", "conflict", 1}, {"exec", "canceled", 1}, {"create", "internal", 0},
	}
	for _, tt := range tests {
		if got := histogramCount(t, m, tt.verb, tt.result); got != tt.count {
			t.Errorf("%s/%s: %d observations, want %d", tt.verb, tt.result, got, tt.count)
		}
	}
}

// histogramCount is den_lifecycle_duration_seconds_count{verb,result}.
func histogramCount(t *testing.T, m *Metrics, verb, result string) int {
	t.Helper()
	mfs, err := m.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "den_lifecycle_duration_seconds" {
			continue
		}
		for _, mt := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range mt.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["verb"] == verb && labels["result"] == result {
				return int(mt.GetHistogram().GetSampleCount())
			}
		}
	}
	return 0
}

// A part that cannot be read is said in den_scrape_error; the rest is
// still served.
func TestScrapeErrorKeepsTheRest(t *testing.T) {
	m := newTest(t, fakeSource{err: errdefs.Unavailable("store closed")})
	if n := testutil.CollectAndCount(&collector{src: fakeSource{err: errdefs.Unavailable("x")}, log: m.log}, "den_scrape_error", "den_pool_size_bytes"); n != 2 {
		t.Errorf("%d series of den_scrape_error and den_pool_size_bytes, want 2", n)
	}
}

// What the handler serves passes promtool's checks: names, units, types
// and help as Prometheus' own linter wants them.
func TestPromtoolChecksOutput(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if testing.Short() {
			t.Skip("promtool not installed (Debian's prometheus package; scripts/test-setup.sh installs it)")
		}
		t.Fatal("promtool not installed: run scripts/test-setup.sh (Debian's prometheus package)")
	}
	m := newTest(t, fakeSource{})
	m.ObserveVerb(sandbox.VerbFork, 200*time.Millisecond, nil)
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Contains(body, []byte(`den_sandbox_state{id="aaaa"`)) || !bytes.Contains(body, []byte("den_lifecycle_duration_seconds_bucket")) {
		t.Fatalf("scrape lacks the sandbox and verb series:\n%s", body)
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = bytes.NewReader(body)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}
