package warm

import (
	"fmt"
	"sort"

	"github.com/den-dev/den/internal/errdefs"
)

// Set records t, image's target from now on, saves every target and
// wakes the filler; it returns t's pool as it is now. The caller has
// checked t (Fits).
func (p *Pools) Set(t Target) (Pool, error) {
	if err := p.setTarget(t); err != nil {
		return Pool{}, err
	}
	p.log.Info("warm pool set", "image", t.Image, "count", t.Count, "memory", t.MemoryBytes)
	p.Wake()
	return p.Pool(t.Image), nil
}

// Fits refuses a count of image's instances the host's memory cannot
// hold above the reserve; more is how many instances it would add to
// those ready or booting, for the caller to check they find a network
// slot each.
func (p *Pools) Fits(image string, count int) (more int, err error) {
	m, ok := p.readMemory()
	p.mu.Lock()
	have := len(p.ready[image]) + p.booting[image]
	est := p.estimateLocked(image)
	p.mu.Unlock()
	more = count - have
	if more <= 0 {
		return 0, nil
	}
	if ok {
		room := m.AvailableBytes - p.reserve(m)
		if int64(more)*est > room {
			return 0, errdefs.WithHint(errdefs.Invalid("%d warm instances of %s would hold about %s of host memory, but only %s is available above the %s reserve",
				count, image, size(int64(count)*est), size(max(room, 0)), size(p.reserve(m))),
				fmt.Sprintf("ask for at most %d", int64(have)+max(room, 0)/est))
		}
	}
	return more, nil
}

// List lists this node's pools: every image with a target or with
// instances still up.
func (p *Pools) List() []Pool {
	p.mu.Lock()
	images := map[string]bool{}
	for _, t := range p.allTargetsLocked() {
		images[t.Image] = true
	}
	for im, l := range p.ready {
		if len(l) > 0 {
			images[im] = true
		}
	}
	p.mu.Unlock()
	names := make([]string, 0, len(images))
	for im := range images {
		names = append(names, im)
	}
	sort.Strings(names)
	out := make([]Pool, 0, len(names))
	for _, im := range names {
		out = append(out, p.Pool(im))
	}
	return out
}

// Pool is image's pool now, with its instances' host memory read.
func (p *Pools) Pool(image string) Pool {
	p.mu.Lock()
	pool := Pool{Target: p.targetLocked(image), Ready: len(p.ready[image]), Booting: p.booting[image], Held: p.held[image]}
	ready := append([]*Instance(nil), p.ready[image]...)
	p.mu.Unlock()
	for _, wi := range ready {
		if n, err := p.host.HostMemory(wi); err == nil {
			pool.HostMemoryBytes += n
		}
	}
	return pool
}

// Health sums up the pools beside the host's memory.
func (p *Pools) Health() *Health {
	m, _ := p.readMemory()
	var h Health
	for _, pool := range p.List() {
		h.Instances += pool.Ready
		h.Booting += pool.Booting
		h.HostMemoryBytes += pool.HostMemoryBytes
	}
	p.mu.Lock()
	h.Memory, h.Pressure = m, p.pressure
	p.mu.Unlock()
	if m.TotalBytes > 0 {
		h.ReserveBytes = p.reserve(m)
	}
	return &h
}
