package integration

import (
	"bytes"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// scrape GETs url with a bearer token ("" for none) and returns the
// status and body.
func scrape(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctxT(t, 30*time.Second), "GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// sampleValue is the value of the series whose line starts with prefix
// (name and labels, up to the value), or -1 when there is none.
func sampleValue(body, prefix string) float64 {
	for line := range strings.Lines(body) {
		if rest, ok := strings.CutPrefix(line, prefix); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err == nil {
				return v
			}
		}
	}
	return -1
}

// /metrics against a real dend: admin:read tokens read it, owner tokens
// and none are refused, a running sandbox's series carry its labels and
// its usage, the create and exec histograms count, promtool accepts the
// output, and --metrics-listen serves it without a token.
func TestMetricsScrape(t *testing.T) {
	addr, maddr := freeAddr(t), freeAddr(t)
	d := startDend(t, "--listen", addr, "--metrics-listen", maddr)
	url := "http://" + addr + "/metrics"
	reader := strings.TrimSpace(d.mustDen("", "token", "create", "prom", "--scope", "admin:read"))
	owner := strings.TrimSpace(d.mustDen("", "token", "create", "alice", "--scope", "owner"))

	sb := d.create("m1")
	d.mustSh("m1", "echo hi; for i in 1 2 3; do sleep 600 & done")
	labels := `{id="` + sb.ID + `",image="busybox",name="m1",owner=""}`

	// The sampler reads running sandboxes every 5 s, and asks den-init
	// for its processes every sixth time: den-init and the three sleeps.
	var body string
	waitFor(t, time.Minute, "m1's usage and processes in /metrics", func() bool {
		code, b := scrape(t, url, reader)
		if code != 200 {
			t.Fatalf("admin:read scrape: %d %s", code, b)
		}
		body = b
		return sampleValue(body, "den_sandbox_memory_working_set_bytes"+labels) > 0 && sampleValue(body, "den_sandbox_processes"+labels) == 4
	})
	for _, series := range []string{
		"den_sandbox_cpu_usage_seconds_total", "den_sandbox_memory_usage_bytes", "den_sandbox_host_tasks",
		"den_sandbox_network_receive_bytes_total", "den_sandbox_network_transmit_bytes_total", "den_sandbox_spec_memory_limit_bytes",
	} {
		if v := sampleValue(body, series+labels); v <= 0 {
			t.Errorf("%s%s = %v, want > 0", series, labels, v)
		}
	}
	if v := sampleValue(body, `den_sandbox_state{id="`+sb.ID+`",image="busybox",name="m1",owner="",state="running"}`); v != 1 {
		t.Errorf("m1's state series: %v", v)
	}
	if v := sampleValue(body, `den_sandboxes{state="running"}`); v != 1 {
		t.Errorf(`den_sandboxes{state="running"} = %v, want 1`, v)
	}
	for _, verb := range []string{"create", "exec"} {
		if v := sampleValue(body, `den_lifecycle_duration_seconds_count{result="ok",verb="`+verb+`"}`); v < 1 {
			t.Errorf("%s histogram count %v, want ≥ 1", verb, v)
		}
	}
	before := sampleValue(body, `den_lifecycle_duration_seconds_count{result="ok",verb="pause"}`)
	if _, err := d.c.Pause(ctxT(t, time.Minute), "m1"); err != nil {
		t.Fatal(err)
	}
	_, body = scrape(t, url, reader)
	if after := sampleValue(body, `den_lifecycle_duration_seconds_count{result="ok",verb="pause"}`); after != max(before, 0)+1 {
		t.Errorf("pause count went from %v to %v, want one more", before, after)
	}
	if !regexp.MustCompile(`den_sandbox_state\{[^}]*name="m1"[^}]*state="paused"\} 1`).MatchString(body) {
		t.Error("m1 not paused in den_sandbox_state")
	}

	cmd := exec.Command("promtool", "check", "metrics")
	cmd.Stdin = bytes.NewReader([]byte(body))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics on dend's output: %v\n%s", err, out)
	}

	// Refused: an owner token (403) and none (401), changing nothing.
	if code, b := scrape(t, url, owner); code != http.StatusForbidden || !strings.Contains(b, "only an admin") {
		t.Errorf("owner token: %d %s", code, b)
	}
	if code, b := scrape(t, url, ""); code != http.StatusUnauthorized {
		t.Errorf("no token: %d %s", code, b)
	}
	// The metrics listener serves /metrics alone, without a token.
	if code, b := scrape(t, "http://"+maddr+"/metrics", ""); code != 200 || !strings.Contains(b, `name="m1"`) {
		t.Errorf("--metrics-listen: %d %s", code, tail(b, 300))
	}
	if code, _ := scrape(t, "http://"+maddr+"/v1/sandboxes", ""); code != http.StatusNotFound {
		t.Errorf("--metrics-listen serves the API too: %d", code)
	}
}
