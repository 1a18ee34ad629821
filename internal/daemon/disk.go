package daemon

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/quota"
	"github.com/den-dev/den/internal/sandbox"
	"github.com/den-dev/den/internal/storage"
	"github.com/den-dev/den/internal/storage/btrfs"
)

// AutoDisk as Config.DefaultDisk caps a sandbox that asks for none at a
// quarter of the pool, and at most autoDiskMax.
const (
	AutoDisk    int64 = -1
	autoDiskMax int64 = 10 << 30
)

func (c *Config) validateDisk() error {
	bad := func(field, format string, a ...any) error {
		return errdefs.Invalid("config %s: %s", field, fmt.Sprintf(format, a...))
	}
	switch {
	case c.DefaultDisk != AutoDisk && c.DefaultDisk != 0 && c.DefaultDisk < sandbox.MinDisk:
		return bad("default-disk", "%d bytes is below the %d MiB minimum", c.DefaultDisk, sandbox.MinDisk>>20)
	case c.DiskOvercommit < 0:
		return bad("disk-overcommit", "negative factor %g", c.DiskOvercommit)
	case c.DiskOvercommit > 0 && c.DiskOvercommit < 1:
		return errdefs.WithHint(bad("disk-overcommit", "%g would refuse caps the pool can hold", c.DiskOvercommit), "use 1 (caps never promise more than the pool) or more; 0 turns the bound off")
	case c.DiskReserve < 0:
		return bad("disk-reserve", "negative size %d", c.DiskReserve)
	case c.DiskReservePercent < 0 || c.DiskReservePercent >= 50:
		return bad("disk-reserve", "%g%% is not from 0 to 50%%", c.DiskReservePercent)
	}
	return nil
}

// reserveOf is the reserve in bytes of a pool of size bytes.
func (c *Config) reserveOf(size int64) int64 {
	if c.DiskReservePercent > 0 {
		return int64(float64(size) * c.DiskReservePercent / 100)
	}
	return c.DiskReserve
}

// diskPolicy is how sandboxes share the opened pool. On a pool that
// cannot cap a sandbox's disk there is no default cap, and dend says so.
func diskPolicy(ctx context.Context, cfg Config, p pool, log *slog.Logger) (quota.DiskPolicy, error) {
	ps, ok := p.(sandbox.PoolStater)
	if !ok {
		return quota.DiskPolicy{}, nil
	}
	u, err := ps.PoolUsage(ctx)
	if err != nil {
		return quota.DiskPolicy{}, err
	}
	pol := quota.DiskPolicy{Default: cfg.DefaultDisk, Overcommit: cfg.DiskOvercommit, Reserve: cfg.reserveOf(u.Size)}
	if pol.Default == AutoDisk {
		pol.Default = min(autoDiskMax, u.Size/4)
	}
	if pol.Default > u.Size {
		return pol, errdefs.WithHint(errdefs.Invalid("config default-disk: %s is more than the whole storage pool (%s)", units(pol.Default), units(u.Size)),
			"give a smaller --default-disk, or leave it at auto")
	}
	if !u.Caps {
		log.Warn("the storage driver cannot cap sandboxes' disks: any sandbox can fill the pool's filesystem; use a btrfs pool for disk caps",
			"storage", p.Name())
		pol.Default = 0
		return pol, nil
	}
	log.Info("storage pool shared", "size", u.Size, "default_disk", pol.Default, "overcommit", pol.Overcommit, "reserve", pol.Reserve)
	return pol, nil
}

// withReserve opens the btrfs pool again, now that its size is known, with
// the reserve sandboxes together may not take.
func withReserve(ctx context.Context, cfg Config, bc btrfs.Config, log *slog.Logger) (*btrfs.Driver, error) {
	u, err := storage.StatPool(bc.Dir)
	if err != nil {
		return nil, err
	}
	bc.Reserve = cfg.reserveOf(u.Size)
	return btrfs.Open(ctx, bc, log)
}

func units(b int64) string { return fmt.Sprintf("%.1fGiB", float64(b)/(1<<30)) }

// poolHealth is the pool's part of GET /v1/health.
func poolHealth(ctx context.Context, svc *sandbox.Service, log *slog.Logger) *api.PoolHealth {
	u, err := svc.PoolReport(ctx)
	if err != nil {
		log.Debug("reading the pool's usage for health", "err", err)
		return nil
	}
	pol := svc.DiskPolicy()
	return &api.PoolHealth{
		SizeBytes: u.Size, UsedBytes: u.Used, FreeBytes: u.Free, ReserveBytes: u.Reserve, Full: u.Free < u.Reserve,
		DiskCaps: u.Caps, DefaultDiskBytes: pol.Default, PromisedBytes: u.Promised, Overcommit: pol.Overcommit,
	}
}
