package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/den-dev/den/api"
)

// The metrics step's fleet of sandboxes: metricsSandboxes in all, of
// which metricsRunning stay running and the rest are stopped, as on a
// host where most sandboxes sleep.
const (
	metricsSandboxes = 500
	metricsRunning   = 20
	metricsClients   = 1                // one at a time: parallel creates interrupt each other's netlink dumps here
	metricsScrapes   = 40               // latency samples of each route
	scrapeInterval   = 15 * time.Second // Prometheus' default
	metricsCPUFor    = 60 * time.Second
)

// metricsScrape measures GET /metrics with 500 sandboxes on a dend of its
// own (a /22 holds only 255 sandboxes' links): its latency beside GET
// /v1/sandboxes on the same socket, and dend's CPU over a minute with a
// scrape every 15 s against a minute without.
func (b *bench) metricsScrape() error {
	// 500 disk caps of 64 MiB want a 32 GiB pool at twice overcommit;
	// the loop file is sparse.
	d, err := startDendWith(b.bin, filepath.Join(b.work, "metrics"), b.metricsSubnet, nil, "--pool-size", "40G")
	if err != nil {
		return fmt.Errorf("starting a dend on %s: %w", b.metricsSubnet, err)
	}
	defer d.close()
	if _, err := d.c.BuildImage(b.ctx, api.BuildImageRequest{Name: "busybox"}, nil); err != nil {
		return fmt.Errorf("building busybox: %w", err)
	}
	start := time.Now()
	off := "0"
	errs := make(chan error, metricsClients)
	for c := range metricsClients {
		go func() {
			for i := c; i < metricsSandboxes; i += metricsClients {
				name := fmt.Sprintf("m%03d", i)
				_, err := d.c.CreateSandbox(b.ctx, api.CreateSandboxRequest{Name: name, Image: "busybox", Memory: "128M", Disk: "64M",
					Policy: &api.Policy{PauseAfter: &off, HibernateAfter: &off, TTL: &off}})
				if err == nil && i >= metricsRunning {
					_, err = d.c.StopSandbox(b.ctx, name)
				}
				if err != nil {
					errs <- d.failed(fmt.Errorf("making %s: %w", name, err))
					return
				}
			}
			errs <- nil
		}()
	}
	for range metricsClients {
		if err := <-errs; err != nil {
			return err
		}
	}
	made := time.Since(start)
	// Let the sampler read the running ones (every 5 s) before timing.
	time.Sleep(6 * time.Second)

	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", filepath.Join(b.work, "metrics", "den.sock"))
	}}}
	get := func(path string) (time.Duration, int, error) {
		var n int64
		took, err := timed(func() error {
			resp, err := hc.Get("http://den" + path)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			n, err = io.Copy(io.Discard, resp.Body)
			if err == nil && resp.StatusCode != 200 {
				err = fmt.Errorf("GET %s: %s", path, resp.Status)
			}
			return err
		})
		return took, int(n), err
	}
	var metrics, list samples
	var metricsBytes, listBytes int
	for range metricsScrapes {
		took, n, err := get("/metrics")
		if err != nil {
			return err
		}
		metrics, metricsBytes = append(metrics, took), n
		if took, n, err = get("/v1/sandboxes"); err != nil {
			return err
		}
		list, listBytes = append(list, took), n
	}
	sort.Slice(metrics, func(i, j int) bool { return metrics[i] < metrics[j] })
	sort.Slice(list, func(i, j int) bool { return list[i] < list[j] })

	pid := d.cmd.Process.Pid
	share := func(cpu, over time.Duration) string {
		return fmt.Sprintf("%.2f%% of one core", 100*cpu.Seconds()/over.Seconds())
	}
	// A minute as it is, then a minute scraped every 15 s.
	quiet := measureCPU(pid, metricsCPUFor, nil)
	var perScrape samples
	var mu sync.Mutex
	scraped := measureCPU(pid, metricsCPUFor, func(stop <-chan struct{}) {
		t := time.NewTicker(scrapeInterval)
		defer t.Stop()
		for {
			before := processCPU(pid)
			get("/metrics")
			mu.Lock()
			perScrape = append(perScrape, processCPU(pid)-before)
			mu.Unlock()
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	})
	b.add(section{
		title: fmt.Sprintf("metrics: %d sandboxes (%d running, %d stopped)", metricsSandboxes, metricsRunning, metricsSandboxes-metricsRunning),
		rows: []row{
			{op: "GET /metrics", den: metrics, goal: "≤ 100 ms", note: fmt.Sprintf("%d KiB", metricsBytes>>10)},
			{op: "GET /v1/sandboxes (beside it)", den: list, note: fmt.Sprintf("%d KiB", listBytes>>10)},
		},
		lines: []string{
			fmt.Sprintf("made the %d sandboxes in %s", metricsSandboxes, made.Round(time.Second)),
			fmt.Sprintf("dend CPU over %s: %s without scrapes, %s scraped every %s (goal ≤ 5%%); about %s of CPU a scrape",
				metricsCPUFor, share(quiet, metricsCPUFor), share(scraped, metricsCPUFor), scrapeInterval, mean(perScrape)),
		},
	})
	return nil
}

// measureCPU is the CPU time process pid used over d, while work (if
// any) runs until its stop channel closes.
func measureCPU(pid int, d time.Duration, work func(stop <-chan struct{})) time.Duration {
	stop := make(chan struct{})
	done := make(chan struct{})
	before := processCPU(pid)
	go func() {
		defer close(done)
		if work != nil {
			work(stop)
		}
	}()
	time.Sleep(d)
	cpu := processCPU(pid) - before
	close(stop)
	<-done
	return cpu
}

func mean(s samples) string {
	if len(s) == 0 {
		return "—"
	}
	var sum time.Duration
	for _, v := range s {
		sum += v
	}
	return ms(sum / time.Duration(len(s)))
}
