package main

import (
	"flag"
	"fmt"
	"strconv"

	"github.com/den-dev/den/internal/daemon"
	"github.com/den-dev/den/internal/sandbox"
)

// quotaFlags declares the flags of owners' default quota and the process
// maximum; the returned func reads those that need parsing, after
// fs.Parse.
func quotaFlags(fs *flag.FlagSet, cfg *daemon.Config) func() error {
	q := &cfg.OwnerQuota
	intFlag := func(v *int, name, help string) {
		def := *v
		if s := env("DEN_"+envName(name), ""); s != "" {
			if n, err := strconv.Atoi(s); err == nil {
				def = n
			}
		}
		fs.IntVar(v, name, def, help)
	}
	intFlag(&cfg.MaxPIDs, "max-pids", "highest process limit an owner token may give a sandbox; owners cannot lift the limit (admins can)")
	intFlag(&q.Sandboxes, "owner-sandboxes", "sandboxes an owner without a quota of its own may have (0: no limit); `den owner set` sets one")
	intFlag(&q.Checkpoints, "owner-checkpoints", "manual checkpoints an owner without a quota of its own may keep (0: no limit)")
	defCPUs, _ := strconv.ParseFloat(env("DEN_OWNER_CPUS", "0"), 64)
	cpus := fs.Float64("owner-cpus", defCPUs, "CPUs, summed over its sandboxes, an owner without a quota of its own may ask for (0: no limit)")
	memory := fs.String("owner-memory", env("DEN_OWNER_MEMORY", "0"), "memory, summed over its sandboxes' limits, an owner without a quota of its own may ask for, e.g. 32G (0: no limit)")
	disk := fs.String("owner-disk", env("DEN_OWNER_DISK", "0"), "disk, summed over its sandboxes' caps, an owner without a quota of its own may ask for, e.g. 200G (0: no limit; when set, every sandbox of such an owner needs a disk cap)")
	return func() error {
		q.CPUs = *cpus
		for _, f := range []struct {
			name, v string
			into    *int64
		}{{"owner-memory", *memory, &q.MemoryBytes}, {"owner-disk", *disk, &q.DiskBytes}} {
			if f.v == "0" {
				*f.into = 0
				continue
			}
			n, err := sandbox.ParseMemory(f.v)
			if err != nil {
				return fmt.Errorf("--%s: %w", f.name, err)
			}
			*f.into = n
		}
		return nil
	}
}
