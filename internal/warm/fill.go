package warm

import (
	"context"
	"fmt"
	"time"
)

// The filler tends the pools in the background, one step at a time so a
// boot never competes with another of its own: it drops instances that
// went stale (their image was rebuilt or removed, their target lowered,
// their den-init replaced), gives one back while the host's memory is
// under the reserve, and otherwise boots the next missing instance.

// Run tends the pools until ctx ends: at every Interval, and at once
// when woken (Wake) or when a step leaves more to do.
func (p *Pools) Run(ctx context.Context) {
	t := time.NewTicker(p.cfg.Interval)
	defer t.Stop()
	for {
		if p.tend(ctx) {
			p.Wake()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-p.kick:
		}
	}
}

// tend takes one step towards the targets and reports whether there is
// more to do at once.
func (p *Pools) tend(ctx context.Context) bool {
	if p.dropStale(ctx) {
		return true
	}
	m, known := p.readMemory()
	p.mu.Lock()
	targets := p.allTargetsLocked()
	pressure := p.pressure
	p.mu.Unlock()
	if pressure {
		held := fmt.Sprintf("host memory low: %s available, under the %s reserve", size(m.AvailableBytes), size(p.reserve(m)))
		p.hold(targets, held)
		return p.shrink(ctx)
	}
	for _, t := range targets {
		p.mu.Lock()
		have := len(p.ready[t.Image]) + p.booting[t.Image]
		est := p.estimateLocked(t.Image)
		p.held[t.Image] = ""
		p.mu.Unlock()
		if have >= t.Count {
			continue
		}
		if known && m.AvailableBytes-est < p.reserve(m) {
			p.hold([]Target{t}, fmt.Sprintf("host memory low: one more instance (about %s) would leave less than the %s reserve", size(est), size(p.reserve(m))))
			continue
		}
		if !p.quiet(ctx) {
			return false
		}
		if err := p.fill(ctx, t); err != nil {
			if ctx.Err() == nil {
				p.log.Warn("booting a warm instance", "image", t.Image, "err", err)
				p.hold([]Target{t}, "last boot failed: "+err.Error())
			}
			continue
		}
		return true
	}
	return false
}

func (p *Pools) hold(targets []Target, why string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, t := range targets {
		p.held[t.Image] = why
	}
}

// dropStale removes one instance the pools should no longer keep, and
// reports whether it found one.
func (p *Pools) dropStale(ctx context.Context) bool {
	p.mu.Lock()
	var images []string
	for im, l := range p.ready {
		if len(l) > 0 {
			images = append(images, im)
		}
	}
	p.mu.Unlock()
	for _, image := range images {
		stamp, err := p.host.Stamp(ctx, image)
		if err != nil {
			continue // ask again later
		}
		p.mu.Lock()
		t := p.targetLocked(image)
		var stale *Instance
		for _, wi := range p.ready[image] {
			if wi.Stamp != stamp || wi.MemoryBytes != t.MemoryBytes || wi.Init != p.cfg.Init {
				stale = wi
				break
			}
		}
		if stale == nil && len(p.ready[image]) > t.Count {
			stale = p.ready[image][len(p.ready[image])-1]
		}
		p.mu.Unlock()
		if stale != nil && p.Remove(stale) {
			p.host.Discard(ctx, stale, "no longer wanted")
			return true
		}
	}
	return false
}

// shrink gives back the oldest instance of the fullest pool, and reports
// whether there is any left.
func (p *Pools) shrink(ctx context.Context) bool {
	p.mu.Lock()
	var victim *Instance
	most := 0
	for _, l := range p.ready {
		if len(l) > most {
			most, victim = len(l), l[0]
		}
	}
	p.mu.Unlock()
	if victim == nil || !p.Remove(victim) {
		return false
	}
	p.host.Discard(ctx, victim, "host memory low")
	return most > 1
}

// fill boots one instance for t, measures what it holds and adds it to
// its pool.
func (p *Pools) fill(ctx context.Context, t Target) error {
	p.mu.Lock()
	p.booting[t.Image]++
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.booting[t.Image]--
		p.mu.Unlock()
	}()
	wi, err := p.host.Boot(ctx, t)
	if err != nil {
		return err
	}
	if n, err := p.host.HostMemory(wi); err == nil {
		p.mu.Lock()
		p.cost[t.Image] = n
		p.mu.Unlock()
	}
	p.mu.Lock()
	p.ready[t.Image] = append(p.ready[t.Image], wi)
	p.mu.Unlock()
	return nil
}

// Exited drops wi, whose engine exited while it waited in its pool, and
// wakes the filler to replace it.
func (p *Pools) Exited(ctx context.Context, wi *Instance) {
	if p.Remove(wi) {
		p.log.Warn("a warm instance's engine exited; replacing it", "instance", wi.ID, "image", wi.Image)
		p.host.Discard(ctx, wi, "engine exited")
		p.Wake()
	}
}

// Drain removes every ready instance: when dend stops, since pool
// instances, unlike sandboxes, are not kept across restarts.
func (p *Pools) Drain(ctx context.Context) {
	p.mu.Lock()
	var all []*Instance
	for im, l := range p.ready {
		all = append(all, l...)
		delete(p.ready, im)
	}
	p.mu.Unlock()
	for _, wi := range all {
		p.host.Discard(ctx, wi, "dend stopping")
	}
}
