package main

import (
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/den-dev/den/internal/daemon"
	"github.com/den-dev/den/internal/sandbox"
)

// diskFlags adds the flags of how sandboxes share the storage pool; the
// returned func parses them into cfg once fs is parsed.
func diskFlags(fs *flag.FlagSet, cfg *daemon.Config) func() error {
	def := fs.String("default-disk", env("DEN_DEFAULT_DISK", "auto"), "disk cap of a sandbox created without --disk: a size, or auto (a quarter of the pool, at most 10G); 0 leaves such sandboxes uncapped")
	over := fs.String("disk-overcommit", env("DEN_DISK_OVERCOMMIT", "2"), "refuse a create or fork when sandboxes' disk caps together would pass the pool's size times this (0: never)")
	reserve := fs.String("disk-reserve", env("DEN_DISK_RESERVE", "10%"), "part of the pool sandboxes cannot fill, kept for checkpoints and hibernation: a size or a percentage")
	return func() error {
		switch v := strings.TrimSpace(*def); v {
		case "auto", "":
			cfg.DefaultDisk = daemon.AutoDisk
		case "0":
			cfg.DefaultDisk = 0
		default:
			n, err := sandbox.ParseMemory(v)
			if err != nil {
				return fmt.Errorf("--default-disk: %q is not a size like 10G, auto or 0", v)
			}
			cfg.DefaultDisk = n
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(*over), 64)
		if err != nil {
			return fmt.Errorf("--disk-overcommit: %q is not a number like 2 or 1.5", *over)
		}
		cfg.DiskOvercommit = f
		v := strings.TrimSpace(*reserve)
		if p, ok := strings.CutSuffix(v, "%"); ok {
			f, err := strconv.ParseFloat(p, 64)
			if err != nil {
				return fmt.Errorf("--disk-reserve: %q is not a percentage like 10%%", v)
			}
			cfg.DiskReservePercent, cfg.DiskReserve = f, 0
			return nil
		}
		n, err := sandbox.ParseMemory(v)
		if v == "0" {
			n, err = 0, nil
		}
		if err != nil {
			return fmt.Errorf("--disk-reserve: %q is not a size like 4G or a percentage like 10%%", v)
		}
		cfg.DiskReservePercent, cfg.DiskReserve = 0, n
		return nil
	}
}
