package warm

import (
	"context"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/docker/go-units"
)

// Config configures warm pools.
type Config struct {
	// Dir keeps the pools' targets and a note of each pool instance; ""
	// turns warm pools off.
	Dir string
	// Defaults are the instances kept per image until `den image warm`
	// sets a count of its own for it (dend's --warm).
	Defaults map[string]int
	// HostMemory reads the host's memory; nil: pools see no pressure.
	HostMemory func() (HostMemory, error)
	// Reserve is the host memory pools leave available: under it they
	// stop refilling and give instances back. Default: a tenth of the
	// host's memory, at least 256 MiB.
	Reserve int64
	// Interval is how often the pools are tended when nothing asks;
	// default 2s.
	Interval time.Duration
	// Quiet is how long after a claim the pools wait before a refill, so
	// the boot does not compete with the new sandbox's first commands for
	// the CPU; default 300ms.
	Quiet time.Duration

	// The sandbox service sets these two from its own configuration;
	// dend's wiring leaves them zero.

	// MemoryBytes is the memory size of the sandboxes an image's default
	// target serves.
	MemoryBytes int64
	// Init is the den-init instances are booted with now: an instance of
	// another is stale.
	Init string
}

// HostMemory is what the host has, as /proc/meminfo tells it.
type HostMemory struct {
	TotalBytes     int64
	AvailableBytes int64
}

// Target is how many instances of an image a pool keeps ready, for
// sandboxes of which memory size.
type Target struct {
	Image       string `json:"image"`
	Count       int    `json:"count"`
	MemoryBytes int64  `json:"memory_bytes"`
}

// Pool is one image's pool on this node now.
type Pool struct {
	Target
	Ready   int
	Booting int
	// HostMemoryBytes is the host memory its ready instances hold (PSS).
	HostMemoryBytes int64
	// Held says why it is below its target and not refilling ("" when it
	// is not held back).
	Held string
}

// Health is what warm pools hold on this host, beside its memory.
type Health struct {
	Instances       int
	Booting         int
	HostMemoryBytes int64
	Memory          HostMemory // zero when unknown
	ReserveBytes    int64
	// Pressure: available memory is under the reserve; pools are
	// shrinking and do not refill.
	Pressure bool
}

// Bounds on warm pools.
const (
	// MaxInstances is the most instances one image's pool may keep.
	MaxInstances = 64
	// costFloor is what one warm instance is assumed to hold on the host
	// until one has been measured (a busybox one holds about 60 MiB).
	costFloor = 64 << 20
	// minReserve is the least host memory pools leave available.
	minReserve = 256 << 20
)

// Instance is one instance of a pool: booted, den-init answering with
// Token, not yet anyone's. Its fields are also its note on disk.
type Instance struct {
	ID          string    `json:"id"`
	Slot        int       `json:"slot"`
	Image       string    `json:"image"`
	Stamp       string    `json:"stamp"` // the image's build it was made from
	MemoryBytes int64     `json:"memory_bytes"`
	CPUs        float64   `json:"cpus"`
	DiskBytes   int64     `json:"disk_bytes,omitempty"` // the cap its volume has: dend's default
	Token       string    `json:"token"`
	Init        string    `json:"init"`
	BootedAt    time.Time `json:"booted_at"`

	unwatch context.CancelFunc // ends the watch of its engine
}

// Watched keeps stop, which ends the watch of the instance's engine.
func (wi *Instance) Watched(stop context.CancelFunc) { wi.unwatch = stop }

// Unwatch ends the watch of the instance's engine, if one was kept.
func (wi *Instance) Unwatch() {
	if wi.unwatch != nil {
		wi.unwatch()
	}
}

// Host is what the pools ask of the service that keeps them: it makes
// and removes instances on the host and knows images' builds. Its
// methods are called without the pools' lock.
type Host interface {
	// Stamp is the build of image an instance must have been made from
	// to be kept; "" when the image is gone.
	Stamp(ctx context.Context, image string) (string, error)
	// Boot makes one instance for t, den-init answering and its engine
	// watched, already noted (Note); on failure nothing of it is left.
	Boot(ctx context.Context, t Target) (*Instance, error)
	// Discard removes an instance no pool holds any more, and its note.
	Discard(ctx context.Context, wi *Instance, why string)
	// HostMemory is the host memory an instance holds (its PSS).
	HostMemory(wi *Instance) (int64, error)
}

// Pools is this node's warm pools; it has its own lock, which it never
// holds while it calls its Host.
type Pools struct {
	cfg  Config
	host Host
	log  *slog.Logger
	kick chan struct{} // wakes the filler

	mu sync.Mutex
	// targets are the counts set with Set, by image; saved in Dir.
	targets map[string]Target
	// ready are the instances waiting to be claimed, by image, oldest
	// first.
	ready map[string][]*Instance
	// booting counts the boots under way, by image.
	booting map[string]int
	// held says why each image's pool is not refilling.
	held map[string]string
	// cost is the last measured host memory of one instance, by image.
	cost map[string]int64
	// memory and pressure are the host's as last read.
	memory   HostMemory
	pressure bool
	// lastTake is when an instance was last claimed.
	lastTake time.Time
}

// New returns pools with no instances; Load reads the saved targets.
func New(cfg Config, host Host, log *slog.Logger) *Pools {
	if cfg.Interval == 0 {
		cfg.Interval = 2 * time.Second
	}
	if cfg.Quiet == 0 {
		cfg.Quiet = 300 * time.Millisecond
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Pools{
		cfg: cfg, host: host, log: log, kick: make(chan struct{}, 1),
		targets: map[string]Target{}, ready: map[string][]*Instance{},
		booting: map[string]int{}, held: map[string]string{}, cost: map[string]int64{},
	}
}

// Wake asks the filler to look at the pools now.
func (p *Pools) Wake() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// targetLocked is image's target: the one set with Set, else dend's
// default.
func (p *Pools) targetLocked(image string) Target {
	if t, ok := p.targets[image]; ok {
		return t
	}
	return Target{Image: image, Count: p.cfg.Defaults[image], MemoryBytes: p.cfg.MemoryBytes}
}

// allTargetsLocked lists every image with a target, set or default,
// sorted by image.
func (p *Pools) allTargetsLocked() []Target {
	seen := map[string]bool{}
	var out []Target
	add := func(image string) {
		if !seen[image] {
			seen[image] = true
			out = append(out, p.targetLocked(image))
		}
	}
	for im := range p.targets {
		add(im)
	}
	for im := range p.cfg.Defaults {
		add(im)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Image < out[j].Image })
	return out
}

// Take hands out a ready instance of image, made from its build stamp
// for sandboxes of memoryBytes, or nil; nil pools have none. No instance
// is handed out twice: it leaves the pool under the lock.
func (p *Pools) Take(image string, memoryBytes int64, stamp string) *Instance {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	list := p.ready[image]
	for i, wi := range list {
		if wi.MemoryBytes == memoryBytes && wi.Stamp == stamp {
			p.ready[image] = append(list[:i:i], list[i+1:]...)
			p.lastTake = time.Now()
			p.Wake() // refill
			return wi
		}
	}
	return nil
}

// quiet waits until no instance was claimed for cfg.Quiet; false when
// ctx ended first.
func (p *Pools) quiet(ctx context.Context) bool {
	for {
		p.mu.Lock()
		d := p.cfg.Quiet - time.Since(p.lastTake)
		p.mu.Unlock()
		if d <= 0 {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(d):
		}
	}
}

// PutBack returns an instance a create took but did not change.
func (p *Pools) PutBack(wi *Instance) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ready[wi.Image] = append([]*Instance{wi}, p.ready[wi.Image]...)
}

// Remove takes wi out of the ready list if it is still there, and
// reports whether it was.
func (p *Pools) Remove(wi *Instance) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	list := p.ready[wi.Image]
	for i, x := range list {
		if x == wi {
			p.ready[wi.Image] = append(list[:i:i], list[i+1:]...)
			return true
		}
	}
	return false
}

// Oldest is the ready instance booted first of all pools, still in its
// pool; nil when none is ready.
func (p *Pools) Oldest() *Instance {
	p.mu.Lock()
	defer p.mu.Unlock()
	var oldest *Instance
	for _, l := range p.ready {
		if len(l) > 0 && (oldest == nil || l[0].BootedAt.Before(oldest.BootedAt)) {
			oldest = l[0]
		}
	}
	return oldest
}

// estimateLocked is what one more instance of image is expected to hold.
func (p *Pools) estimateLocked(image string) int64 {
	return max(p.cost[image], costFloor)
}

// reserve is the host memory pools leave available.
func (p *Pools) reserve(m HostMemory) int64 {
	if p.cfg.Reserve > 0 {
		return p.cfg.Reserve
	}
	return max(m.TotalBytes/10, minReserve)
}

// readMemory reads the host's memory and records whether it is under
// pressure; ok is false when it cannot be read.
func (p *Pools) readMemory() (HostMemory, bool) {
	if p.cfg.HostMemory == nil {
		return HostMemory{}, false
	}
	m, err := p.cfg.HostMemory()
	if err != nil || m.TotalBytes == 0 {
		return HostMemory{}, false
	}
	p.mu.Lock()
	p.memory = m
	p.pressure = m.AvailableBytes < p.reserve(m)
	p.mu.Unlock()
	return m, true
}

func size(b int64) string { return units.BytesSize(float64(b)) }
