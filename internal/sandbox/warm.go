package sandbox

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/netpolicy"
)

// Warm pools keep instances of an image booted ahead of demand, so a
// create that fits one costs a claim instead of a boot. A pool instance
// has been made as a create would make it (its own root snapshot, runsc
// up, den-init answering, a namespace with no egress) but belongs to no
// sandbox and is in no record: the pool keeps it in memory and notes it
// in a file of its own (warmnotes.go), so that a dend killed with pools
// up removes what it left when it starts again.
//
// A claim (warmclaim.go) makes a ready instance the new sandbox's first
// generation: it takes the sandbox's id, name, host name, den-init
// token, limits, network policy and disk cap; env, labels and secrets
// are the record's and reach its commands at exec, as in any sandbox.
// Each instance booted on its own, so its gVisor kernel's random state
// and boot_id are its own, never shared with another; den-init renews
// its own identity when claimed and refuses a claim once anything ran.
//
// The pools are this node's alone: in a fleet each dend keeps its own,
// and no other node ever sees their instances. They refill in the
// background (warmfill.go), one boot at a time, and shrink when the
// host's available memory falls under the reserve.

// WarmConfig configures warm pools.
type WarmConfig struct {
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
}

// HostMemory is what the host has, as /proc/meminfo tells it.
type HostMemory struct {
	TotalBytes     int64
	AvailableBytes int64
}

// HostnameSetter is a Runtime that can give a running instance a new
// host name; warm pools need one.
type HostnameSetter interface {
	// StartHostnameHelper starts, in a running instance, the helper
	// through which den-init sets the name a claim brings (see
	// guest.ClaimRequest): the claim then costs no engine call.
	StartHostnameHelper(ctx context.Context, id string) error
	// SetHostname names a running instance at once.
	SetHostname(ctx context.Context, id, name string) error
}

// HostMemoryReader is a Runtime that can tell the host memory an instance
// holds (its proportional set size).
type HostMemoryReader interface {
	HostPSS(id string) (int64, error)
}

// WarmTarget is how many instances of an image a pool keeps ready, for
// sandboxes of which memory size.
type WarmTarget struct {
	Image       string `json:"image"`
	Count       int    `json:"count"`
	MemoryBytes int64  `json:"memory_bytes"`
}

// WarmPool is one image's pool on this node now.
type WarmPool struct {
	WarmTarget
	Ready   int
	Booting int
	// HostMemoryBytes is the host memory its ready instances hold (PSS).
	HostMemoryBytes int64
	// Held says why it is below its target and not refilling ("" when it
	// is not held back).
	Held string
}

// WarmHealth is what warm pools hold on this host, beside its memory.
type WarmHealth struct {
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
	// MaxWarm is the most instances one image's pool may keep.
	MaxWarm = 64
	// warmCostFloor is what one warm instance is assumed to hold on the
	// host until one has been measured (a busybox one holds about 60 MiB).
	warmCostFloor = 64 << 20
	// minWarmReserve is the least host memory pools leave available.
	minWarmReserve = 256 << 20
)

// warmInstance is one instance of a pool: booted, den-init answering
// with Token, not yet anyone's. Its fields are also its note on disk.
type warmInstance struct {
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

	stopWatch context.CancelFunc // ends the watch of its engine
}

// sandbox is the stand-in record the lifecycle helpers work with while
// the instance is the pool's; it is never stored.
func (wi *warmInstance) sandbox() *Sandbox {
	return &Sandbox{
		ID: wi.ID, Name: "warm-" + wi.ID, Generation: 1, Slot: wi.Slot, Token: wi.Token, Init: wi.Init,
		Spec: Spec{Image: wi.Image, CPUs: wi.CPUs, MemoryBytes: wi.MemoryBytes, DiskBytes: wi.DiskBytes, Network: netpolicy.Policy{Mode: netpolicy.ModeNone}},
	}
}

// imageStamp tells builds of an image apart: a rebuilt or replaced image
// makes the pool's instances of the old one stale.
func imageStamp(im *Image) string {
	return fmt.Sprintf("%s@%d", im.Digest, im.CreatedAt.UnixNano())
}

// warmPools is the pools' bookkeeping; it has its own lock, taken after
// Service.mu when both are needed.
type warmPools struct {
	cfg  WarmConfig
	kick chan struct{} // wakes the filler

	mu sync.Mutex
	// targets are the counts set with SetWarm, by image; saved in Dir.
	targets map[string]WarmTarget
	// ready are the instances waiting to be claimed, by image, oldest
	// first.
	ready map[string][]*warmInstance
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

func newWarmPools(cfg WarmConfig) *warmPools {
	if cfg.Interval == 0 {
		cfg.Interval = 2 * time.Second
	}
	if cfg.Quiet == 0 {
		cfg.Quiet = 300 * time.Millisecond
	}
	return &warmPools{
		cfg: cfg, kick: make(chan struct{}, 1),
		targets: map[string]WarmTarget{}, ready: map[string][]*warmInstance{},
		booting: map[string]int{}, held: map[string]string{}, cost: map[string]int64{},
	}
}

// wake asks the filler to look at the pools now.
func (w *warmPools) wake() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// targetOfLocked is image's target: the one set with SetWarm, else
// dend's default.
func (w *warmPools) targetOfLocked(image string) WarmTarget {
	if t, ok := w.targets[image]; ok {
		return t
	}
	return WarmTarget{Image: image, Count: w.cfg.Defaults[image], MemoryBytes: DefaultMemory}
}

// allTargetsLocked lists every image with a target, set or default,
// sorted by image.
func (w *warmPools) allTargetsLocked() []WarmTarget {
	seen := map[string]bool{}
	var out []WarmTarget
	add := func(image string) {
		if !seen[image] {
			seen[image] = true
			out = append(out, w.targetOfLocked(image))
		}
	}
	for im := range w.targets {
		add(im)
	}
	for im := range w.cfg.Defaults {
		add(im)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Image < out[j].Image })
	return out
}

// take hands out a ready instance a sandbox of spec made from im can
// become, or nil. No instance is handed out twice: it leaves the pool
// under the lock.
func (w *warmPools) take(spec Spec, im *Image) *warmInstance {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	list := w.ready[spec.Image]
	stamp := imageStamp(im)
	for i, wi := range list {
		if wi.MemoryBytes == spec.MemoryBytes && wi.Stamp == stamp {
			w.ready[spec.Image] = append(list[:i:i], list[i+1:]...)
			w.lastTake = time.Now()
			w.wake() // refill
			return wi
		}
	}
	return nil
}

// quiet waits until no instance was claimed for cfg.Quiet; false when
// ctx ended first.
func (w *warmPools) quiet(ctx context.Context) bool {
	for {
		w.mu.Lock()
		d := w.cfg.Quiet - time.Since(w.lastTake)
		w.mu.Unlock()
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

// putBack returns an instance a create took but did not change.
func (w *warmPools) putBack(wi *warmInstance) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ready[wi.Image] = append([]*warmInstance{wi}, w.ready[wi.Image]...)
}

// remove takes wi out of the ready list if it is still there, and
// reports whether it was.
func (w *warmPools) remove(wi *warmInstance) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	list := w.ready[wi.Image]
	for i, x := range list {
		if x == wi {
			w.ready[wi.Image] = append(list[:i:i], list[i+1:]...)
			return true
		}
	}
	return false
}

// estimateLocked is what one more instance of image is expected to hold.
func (w *warmPools) estimateLocked(image string) int64 {
	return max(w.cost[image], warmCostFloor)
}

// reserve is the host memory pools leave available.
func (w *warmPools) reserve(m HostMemory) int64 {
	if w.cfg.Reserve > 0 {
		return w.cfg.Reserve
	}
	return max(m.TotalBytes/10, minWarmReserve)
}

// readMemory reads the host's memory and records whether it is under
// pressure; ok is false when it cannot be read.
func (w *warmPools) readMemory() (HostMemory, bool) {
	if w.cfg.HostMemory == nil {
		return HostMemory{}, false
	}
	m, err := w.cfg.HostMemory()
	if err != nil || m.TotalBytes == 0 {
		return HostMemory{}, false
	}
	w.mu.Lock()
	w.memory = m
	w.pressure = m.AvailableBytes < w.reserve(m)
	w.mu.Unlock()
	return m, true
}

// warmEnabled says whether this dend keeps warm pools at all.
func (s *Service) warmEnabled() error {
	if s.warm == nil {
		return errdefs.WithHint(errdefs.Unavailable("this dend keeps no warm pools"), "dend keeps them when it has a data directory and its engine can rename instances")
	}
	return nil
}

// SetWarm sets how many instances of image this node keeps booted ahead
// of demand, for sandboxes of memoryBytes (0: the default size). count 0
// empties the pool. Bad input changes nothing.
func (s *Service) SetWarm(ctx context.Context, image string, count int, memoryBytes int64) (WarmPool, error) {
	if err := s.warmEnabled(); err != nil {
		return WarmPool{}, err
	}
	if err := ValidateName("image", image); err != nil {
		return WarmPool{}, err
	}
	if count < 0 || count > MaxWarm {
		return WarmPool{}, errdefs.WithHint(errdefs.Invalid("invalid warm count %d", count),
			fmt.Sprintf("use a number from 0 (no pool) to %d", MaxWarm))
	}
	if memoryBytes == 0 {
		memoryBytes = DefaultMemory
	}
	if memoryBytes < MinMemory {
		return WarmPool{}, errdefs.WithHint(errdefs.Invalid("invalid memory %s: below the %s minimum", size(memoryBytes), size(MinMemory)),
			"use the memory size the sandboxes it serves are created with, like 512M or 1G")
	}
	if count > 0 {
		if _, err := s.cfg.Store.GetImage(ctx, image); err != nil {
			if errors.Is(err, errdefs.ErrNotFound) {
				return WarmPool{}, errdefs.WithHint(errdefs.NotFound("image %q not found", image),
					"list images with `den image ls`; build, import or pull it first (`den image build busybox` for a built-in one)")
			}
			return WarmPool{}, err
		}
		if err := s.warmFits(image, count); err != nil {
			return WarmPool{}, err
		}
	}
	t := WarmTarget{Image: image, Count: count, MemoryBytes: memoryBytes}
	if err := s.warm.setTarget(t); err != nil {
		return WarmPool{}, err
	}
	s.log.Info("warm pool set", "image", image, "count", count, "memory", memoryBytes)
	s.warm.wake()
	return s.warmPool(image), nil
}

// warmFits refuses a count the host cannot hold: more instances than its
// memory above the reserve, or than free network slots.
func (s *Service) warmFits(image string, count int) error {
	w := s.warm
	m, ok := w.readMemory()
	w.mu.Lock()
	have := len(w.ready[image]) + w.booting[image]
	est := w.estimateLocked(image)
	w.mu.Unlock()
	more := count - have
	if more <= 0 {
		return nil
	}
	if ok {
		room := m.AvailableBytes - w.reserve(m)
		if int64(more)*est > room {
			return errdefs.WithHint(errdefs.Invalid("%d warm instances of %s would hold about %s of host memory, but only %s is available above the %s reserve",
				count, image, size(int64(count)*est), size(max(room, 0)), size(w.reserve(m))),
				fmt.Sprintf("ask for at most %d", int64(have)+max(room, 0)/est))
		}
	}
	s.mu.Lock()
	free := s.cfg.Network.Slots() - len(s.slotTaken)
	s.mu.Unlock()
	if more > free {
		return errdefs.WithHint(errdefs.Invalid("%d more warm instances of %s need as many sandbox addresses, but %d are free", more, image, free),
			"ask for fewer, or give dend a wider --subnet")
	}
	return nil
}

// WarmPools lists this node's pools: every image with a target or with
// instances still up.
func (s *Service) WarmPools(ctx context.Context) []WarmPool {
	if s.warm == nil {
		return nil
	}
	w := s.warm
	w.mu.Lock()
	images := map[string]bool{}
	for _, t := range w.allTargetsLocked() {
		images[t.Image] = true
	}
	for im, l := range w.ready {
		if len(l) > 0 {
			images[im] = true
		}
	}
	w.mu.Unlock()
	names := make([]string, 0, len(images))
	for im := range images {
		names = append(names, im)
	}
	sort.Strings(names)
	out := make([]WarmPool, 0, len(names))
	for _, im := range names {
		out = append(out, s.warmPool(im))
	}
	return out
}

// warmPool is image's pool now, with its instances' host memory read.
func (s *Service) warmPool(image string) WarmPool {
	w := s.warm
	w.mu.Lock()
	p := WarmPool{WarmTarget: w.targetOfLocked(image), Ready: len(w.ready[image]), Booting: w.booting[image], Held: w.held[image]}
	ids := make([]string, 0, p.Ready)
	for _, wi := range w.ready[image] {
		ids = append(ids, wi.sandbox().InstanceID())
	}
	w.mu.Unlock()
	p.HostMemoryBytes = s.hostPSS(ids)
	return p
}

// hostPSS adds up the host memory of instances; 0 where it cannot be read.
func (s *Service) hostPSS(ids []string) int64 {
	r, ok := s.cfg.Runtime.(HostMemoryReader)
	if !ok {
		return 0
	}
	var total int64
	for _, id := range ids {
		if n, err := r.HostPSS(id); err == nil {
			total += n
		}
	}
	return total
}

// WarmHealth sums up the pools beside the host's memory.
func (s *Service) WarmHealth(ctx context.Context) *WarmHealth {
	if s.warm == nil {
		return nil
	}
	w := s.warm
	m, _ := w.readMemory()
	var h WarmHealth
	for _, p := range s.WarmPools(ctx) {
		h.Instances += p.Ready
		h.Booting += p.Booting
		h.HostMemoryBytes += p.HostMemoryBytes
	}
	w.mu.Lock()
	h.Memory, h.Pressure = m, w.pressure
	w.mu.Unlock()
	if m.TotalBytes > 0 {
		h.ReserveBytes = w.reserve(m)
	}
	return &h
}
