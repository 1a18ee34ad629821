// Package warming is this node's warm pools seen from above the sandbox
// core: the admin's verbs on them, setting how many instances of an
// image are kept booted ahead of demand (SetWarm) and listing the pools
// (WarmPools), as httpapi.WarmService asks; and booting, handing over,
// claiming and removing their instances on the host (Instances), which
// the pools (warm.Host) and the core's create (sandbox.WarmInstances)
// call.
//
// It sits above the sandbox core: it imports internal/sandbox and uses
// only the Service's exported primitives (Pools, FreeSlots; for an
// instance, the steps a create makes under a stand-in record never
// stored: BootStandIn, Halt, AllocSlot, DialGuest, ...; for a claim, the
// steps a boot makes once it is the sandbox's: EnforceLimitsLocked,
// Fence, EnforceNetworkLocked, SuperviseLocked, ...) and the records'
// images. The pools' state and decisions are internal/warm's; the claim
// (giving an instance the sandbox's identity, limits and policy) is
// claim.go's, and where create takes an instance and boots cold when its
// claim fails is the core's.
// It must never be imported by internal/sandbox, never store a sandbox
// record, and never reach into the Service's own state (its maps and
// locks).
package warming

import (
	"context"
	"errors"
	"fmt"

	"github.com/docker/go-units"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/sandbox"
	"github.com/den-dev/den/internal/specs"
	"github.com/den-dev/den/internal/warm"
)

// Sandboxes is what the verbs use of the core (sandbox.Service).
type Sandboxes interface {
	// Pools are this node's warm pools; nil when it keeps none.
	Pools() *warm.Pools
	// FreeSlots counts the network slots no sandbox or pool instance
	// holds.
	FreeSlots() int
}

// Images finds an image's record (sandbox.Store).
type Images interface {
	GetImage(ctx context.Context, name string) (*sandbox.Image, error)
}

// Config is what a Service needs.
type Config struct {
	Sandboxes Sandboxes
	Images    Images
}

// Service carries out the warm pools' admin verbs.
type Service struct {
	svc    Sandboxes
	images Images
}

// New returns a Service.
func New(cfg Config) *Service { return &Service{svc: cfg.Sandboxes, images: cfg.Images} }

// enabled returns the pools, or why this dend keeps none.
func (s *Service) enabled() (*warm.Pools, error) {
	p := s.svc.Pools()
	if p == nil {
		return nil, errdefs.WithHint(errdefs.Unavailable("this dend keeps no warm pools"), "dend keeps them when it has a data directory and its engine can rename instances")
	}
	return p, nil
}

// SetWarm sets how many instances of image this node keeps booted ahead
// of demand, for sandboxes of memoryBytes (0: the default size). count 0
// empties the pool. Bad input changes nothing.
func (s *Service) SetWarm(ctx context.Context, image string, count int, memoryBytes int64) (warm.Pool, error) {
	pools, err := s.enabled()
	if err != nil {
		return warm.Pool{}, err
	}
	if err := specs.ValidateName("image", image); err != nil {
		return warm.Pool{}, err
	}
	if count < 0 || count > warm.MaxInstances {
		return warm.Pool{}, errdefs.WithHint(errdefs.Invalid("invalid warm count %d", count),
			fmt.Sprintf("use a number from 0 (no pool) to %d", warm.MaxInstances))
	}
	if memoryBytes == 0 {
		memoryBytes = sandbox.DefaultMemory
	}
	if memoryBytes < sandbox.MinMemory {
		return warm.Pool{}, errdefs.WithHint(errdefs.Invalid("invalid memory %s: below the %s minimum", size(memoryBytes), size(sandbox.MinMemory)),
			"use the memory size the sandboxes it serves are created with, like 512M or 1G")
	}
	if count > 0 {
		if _, err := s.images.GetImage(ctx, image); err != nil {
			if errors.Is(err, errdefs.ErrNotFound) {
				return warm.Pool{}, errdefs.WithHint(errdefs.NotFound("image %q not found", image),
					"list images with `den image ls`; build, import or pull it first (`den image build busybox` for a built-in one)")
			}
			return warm.Pool{}, err
		}
		if err := s.fits(pools, image, count); err != nil {
			return warm.Pool{}, err
		}
	}
	return pools.Set(warm.Target{Image: image, Count: count, MemoryBytes: memoryBytes})
}

// fits refuses a count the host cannot hold: more instances than its
// memory above the reserve (the pools tell), or than free network slots.
func (s *Service) fits(pools *warm.Pools, image string, count int) error {
	more, err := pools.Fits(image, count)
	if err != nil || more <= 0 {
		return err
	}
	if free := s.svc.FreeSlots(); more > free {
		return errdefs.WithHint(errdefs.Invalid("%d more warm instances of %s need as many sandbox addresses, but %d are free", more, image, free),
			"ask for fewer, or give dend a wider --subnet")
	}
	return nil
}

// WarmPools lists this node's pools: every image with a target or with
// instances still up.
func (s *Service) WarmPools(ctx context.Context) []warm.Pool {
	pools := s.svc.Pools()
	if pools == nil {
		return nil
	}
	return pools.List()
}

// size writes b bytes as the core's messages do.
func size(b int64) string { return units.BytesSize(float64(b)) }
