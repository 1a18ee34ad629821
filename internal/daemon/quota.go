package daemon

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/quota"
	"github.com/den-dev/den/internal/sandbox"
)

// Defaults of the quota of owners without one of their own, and of the
// highest process limit an owner may set.
const (
	DefaultOwnerSandboxes   = 50
	DefaultOwnerCheckpoints = 500
	DefaultMaxPIDs          = 32768
)

// quotas is what the sandbox service bounds owners and sandboxes with.
func (c *Config) quotas(owners quota.OwnerStore) quota.Quotas {
	return quota.Quotas{Owners: owners, Default: c.OwnerQuota, Host: hostLimits(), MaxPIDs: c.MaxPIDs}
}

func (c *Config) validateQuotas() error {
	if err := c.OwnerQuota.Validate(); err != nil {
		return fmt.Errorf("config owner quota: %w", err)
	}
	if c.MaxPIDs < sandbox.MinPIDs || c.MaxPIDs > sandbox.MaxPIDs {
		return errdefs.Invalid("config max-pids: %d is not from %d to %d", c.MaxPIDs, sandbox.MinPIDs, sandbox.MaxPIDs)
	}
	return nil
}

// hostLimits is what this host has: its CPUs and its memory.
func hostLimits() quota.HostLimits {
	return quota.HostLimits{MemoryBytes: memTotal(), CPUs: runtime.NumCPU()}
}

// memTotal reads MemTotal from /proc/meminfo; 0 when it cannot.
func memTotal() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil {
			return 0
		}
		return kb << 10
	}
	return 0
}
