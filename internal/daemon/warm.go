package daemon

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/sandbox"
	"github.com/den-dev/den/internal/specs"
	"github.com/den-dev/den/internal/warm"
	"github.com/den-dev/den/internal/warming"
)

// WarmDefaults reads --warm, "IMAGE=N,...": how many instances of each
// image this node keeps booted ahead of demand until `den image warm`
// sets a count of its own.
func (c *Config) WarmDefaults() (map[string]int, error) {
	out := map[string]int{}
	for _, part := range strings.Split(c.Warm, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		image, n, ok := strings.Cut(part, "=")
		count, err := strconv.Atoi(n)
		if !ok || err != nil || count < 0 || count > warm.MaxInstances {
			return nil, errdefs.WithHint(errdefs.Invalid("config warm: %q is not IMAGE=N with N from 0 to %d", part, warm.MaxInstances),
				"write it like busybox=4,debian=2")
		}
		if err := specs.ValidateName("image", image); err != nil {
			return nil, fmt.Errorf("config warm: %w", err)
		}
		out[image] = count
	}
	return out, nil
}

// warmConfig is the warm pools' configuration.
func (c *Config) warmConfig() (warm.Config, error) {
	defaults, err := c.WarmDefaults()
	if err != nil {
		return warm.Config{}, err
	}
	return warm.Config{Dir: filepath.Join(c.DataDir, "warm"), Defaults: defaults, HostMemory: hostMemory, Reserve: c.WarmReserve}, nil
}

// hostMemory reads MemTotal and MemAvailable from /proc/meminfo.
func hostMemory() (warm.HostMemory, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return warm.HostMemory{}, err
	}
	defer f.Close()
	return parseMeminfo(bufio.NewScanner(f))
}

func parseMeminfo(sc *bufio.Scanner) (warm.HostMemory, error) {
	var m warm.HostMemory
	for sc.Scan() {
		key, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		var into *int64
		switch key {
		case "MemTotal":
			into = &m.TotalBytes
		case "MemAvailable":
			into = &m.AvailableBytes
		default:
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil {
			return m, fmt.Errorf("reading /proc/meminfo %s: %w", key, err)
		}
		*into = kb << 10
	}
	if m.TotalBytes == 0 {
		return m, fmt.Errorf("reading /proc/meminfo: no MemTotal")
	}
	return m, sc.Err()
}

// warmHealth is the warm pools' part of GET /v1/health.
func warmHealth(h *warm.Health) *api.WarmHealth {
	if h == nil {
		return nil
	}
	return &api.WarmHealth{
		Instances: h.Instances, Booting: h.Booting, HostMemoryBytes: h.HostMemoryBytes,
		MemoryTotalBytes: h.Memory.TotalBytes, MemoryAvailableBytes: h.Memory.AvailableBytes,
		ReserveBytes: h.ReserveBytes, Pressure: h.Pressure,
	}
}

// useWarm gives svc this node's warm pools, configured by wc, and what
// boots their instances (internal/warming); none when the engine cannot
// name instances or there is no data directory.
func useWarm(svc *sandbox.Service, scfg sandbox.Config, wc warm.Config) error {
	instances, err := warming.NewInstances(warming.InstancesConfig{Core: svc, Images: scfg.Store, Versions: scfg.Images,
		Volumes: scfg.Volumes, Engine: scfg.Runtime, Warm: wc, Init: scfg.Init, Logger: scfg.Logger})
	if err != nil || instances == nil {
		return err
	}
	svc.UseWarm(instances)
	return nil
}

// runWarm starts tending svc's warm pools until it closes; call it after
// Recover. Without warm pools it does nothing.
func runWarm(svc *sandbox.Service) {
	if pools := svc.Pools(); pools != nil {
		svc.Go(pools.Run)
	}
}
