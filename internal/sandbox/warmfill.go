package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/guest"
)

// The filler tends the pools in the background, one step at a time so a
// boot never competes with another of its own: it drops instances that
// went stale (their image was rebuilt or removed, their target lowered,
// their engine died), gives one back while the host's memory is under
// the reserve, and otherwise boots the next missing instance.

// RunWarm starts tending the warm pools until Close; call it after
// Recover. Without warm pools it does nothing.
func (s *Service) RunWarm() {
	if s.warm == nil {
		return
	}
	w := s.warm
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(w.cfg.Interval)
		defer t.Stop()
		for {
			again := s.tendWarm(s.ctx)
			if again {
				w.wake()
			}
			select {
			case <-s.ctx.Done():
				return
			case <-t.C:
			case <-w.kick:
			}
		}
	}()
}

// tendWarm takes one step towards the targets and reports whether there
// is more to do at once.
func (s *Service) tendWarm(ctx context.Context) bool {
	w := s.warm
	if s.dropStaleWarm(ctx) {
		return true
	}
	m, known := w.readMemory()
	w.mu.Lock()
	targets := w.allTargetsLocked()
	pressure := w.pressure
	w.mu.Unlock()
	if pressure {
		held := fmt.Sprintf("host memory low: %s available, under the %s reserve", size(m.AvailableBytes), size(w.reserve(m)))
		s.holdWarm(targets, held)
		return s.shrinkWarm(ctx)
	}
	for _, t := range targets {
		w.mu.Lock()
		have := len(w.ready[t.Image]) + w.booting[t.Image]
		est := w.estimateLocked(t.Image)
		w.held[t.Image] = ""
		w.mu.Unlock()
		if have >= t.Count {
			continue
		}
		if known && m.AvailableBytes-est < w.reserve(m) {
			s.holdWarm([]WarmTarget{t}, fmt.Sprintf("host memory low: one more instance (about %s) would leave less than the %s reserve", size(est), size(w.reserve(m))))
			continue
		}
		if !w.quiet(ctx) {
			return false
		}
		if err := s.fillWarm(ctx, t); err != nil {
			if ctx.Err() == nil {
				s.log.Warn("booting a warm instance", "image", t.Image, "err", err)
				s.holdWarm([]WarmTarget{t}, "last boot failed: "+err.Error())
			}
			continue
		}
		return true
	}
	return false
}

func (s *Service) holdWarm(targets []WarmTarget, why string) {
	s.warm.mu.Lock()
	defer s.warm.mu.Unlock()
	for _, t := range targets {
		s.warm.held[t.Image] = why
	}
}

// dropStaleWarm removes one instance the pools should no longer keep,
// and reports whether it found one.
func (s *Service) dropStaleWarm(ctx context.Context) bool {
	w := s.warm
	w.mu.Lock()
	var images []string
	for im, l := range w.ready {
		if len(l) > 0 {
			images = append(images, im)
		}
	}
	w.mu.Unlock()
	for _, image := range images {
		stamp := ""
		if im, err := s.cfg.Store.GetImage(ctx, image); err == nil {
			stamp = imageStamp(im)
		} else if !errors.Is(err, errdefs.ErrNotFound) {
			continue // ask again later
		}
		w.mu.Lock()
		t := w.targetOfLocked(image)
		var stale *warmInstance
		for _, wi := range w.ready[image] {
			if wi.Stamp != stamp || wi.MemoryBytes != t.MemoryBytes || wi.Init != s.cfg.Init {
				stale = wi
				break
			}
		}
		if stale == nil && len(w.ready[image]) > t.Count {
			stale = w.ready[image][len(w.ready[image])-1]
		}
		w.mu.Unlock()
		if stale != nil && w.remove(stale) {
			s.discardWarm(ctx, stale, "no longer wanted")
			return true
		}
	}
	return false
}

// shrinkWarm gives back the oldest instance of the fullest pool, and
// reports whether there is any left.
func (s *Service) shrinkWarm(ctx context.Context) bool {
	w := s.warm
	w.mu.Lock()
	var victim *warmInstance
	most := 0
	for _, l := range w.ready {
		if len(l) > most {
			most, victim = len(l), l[0]
		}
	}
	w.mu.Unlock()
	if victim == nil || !w.remove(victim) {
		return false
	}
	s.discardWarm(ctx, victim, "host memory low")
	return most > 1
}

// fillWarm boots one instance for t and adds it to its pool.
func (s *Service) fillWarm(ctx context.Context, t WarmTarget) error {
	w := s.warm
	w.mu.Lock()
	w.booting[t.Image]++
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		w.booting[t.Image]--
		w.mu.Unlock()
	}()
	// As a create gets it: the newest version, downloaded or built here
	// when another node of the fleet made it.
	if err := s.fetchImage(ctx, t.Image); err != nil {
		return err
	}
	im, err := s.cfg.Images.Version(ctx, t.Image, 0)
	if err != nil {
		return fmt.Errorf("preparing image %q: %w", t.Image, err)
	}
	if err := s.checkReserve("boot a warm instance"); err != nil {
		return err
	}
	t0 := time.Now()
	wi, err := s.bootWarm(ctx, t, im)
	if err != nil {
		return err
	}
	if r, ok := s.cfg.Runtime.(HostMemoryReader); ok {
		if n, err := r.HostPSS(wi.sandbox().InstanceID()); err == nil {
			w.mu.Lock()
			w.cost[t.Image] = n
			w.mu.Unlock()
		}
	}
	s.watchWarm(wi)
	w.mu.Lock()
	w.ready[t.Image] = append(w.ready[t.Image], wi)
	w.mu.Unlock()
	s.log.Debug("warm instance ready", "image", t.Image, "instance", wi.ID, "boot", time.Since(t0))
	return nil
}

// bootWarm makes one pool instance of im as a create would: its own
// root snapshot, a namespace with no egress, runsc up and den-init
// answering to the pool's token. On failure nothing is left.
func (s *Service) bootWarm(ctx context.Context, t WarmTarget, im *Image) (_ *warmInstance, err error) {
	wi := &warmInstance{
		ID: newID(12), Image: im.Name, Stamp: imageStamp(im), MemoryBytes: t.MemoryBytes, CPUs: DefaultCPUs,
		DiskBytes: s.diskCap(0), Token: newToken(), Init: s.cfg.Init, BootedAt: s.cfg.Now().UTC(),
	}
	if wi.Slot, err = s.allocSlot(wi.ID); err != nil {
		return nil, err
	}
	if err := s.warm.note(wi); err != nil {
		s.releaseSlot(wi.Slot)
		return nil, err
	}
	defer func() {
		if err != nil {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
			defer cancel()
			s.discardWarm(cctx, wi, "boot failed")
		}
	}()
	sb := wi.sandbox()
	if _, err := s.cfg.Volumes.Snapshot(ctx, im.VolumeKey(), sb.VolumeKey(), false); err != nil {
		return nil, fmt.Errorf("making its root filesystem: %w", err)
	}
	// The default cap, which most creates get: their claim skips it.
	if err := s.capDisk(ctx, sb); err != nil {
		return nil, err
	}
	att, err := s.attach(ctx, sb)
	if err != nil {
		return nil, err
	}
	// The boot token stays den-init's until the claim: a rekey would
	// close the socket the host name helper comes through.
	if err := s.cfg.Runtime.Start(ctx, s.instance(sb, att.Netns, wi.Token)); err != nil {
		return nil, err
	}
	_, addr := s.cfg.Network.Addr(sb.Slot)
	g := s.cfg.Dial(netip.AddrPortFrom(addr, guest.Port), wi.Token)
	defer closeGuest(g)
	if err := s.whenListening(ctx, sb, func(ctx context.Context) error {
		_, err := g.Ping(ctx)
		return err
	}); err != nil {
		return nil, err
	}
	if err := s.cfg.Runtime.(HostnameSetter).StartHostnameHelper(ctx, sb.InstanceID()); err != nil {
		// The claim names it the slow way.
		s.log.Warn("a warm instance has no host name helper", "instance", wi.ID, "err", err)
	}
	return wi, nil
}

// discardWarm removes a pool instance no create holds, and its note.
func (s *Service) discardWarm(ctx context.Context, wi *warmInstance, why string) {
	s.log.Debug("removing a warm instance", "instance", wi.ID, "image", wi.Image, "why", why)
	s.tearDownWarm(ctx, wi)
	s.releaseSlot(wi.Slot)
	if err := s.warm.forget(wi.ID); err != nil {
		s.log.Error("removing a warm instance", "instance", wi.ID, "err", err)
	}
}

// watchWarm drops wi from its pool if its engine exits while it waits.
func (s *Service) watchWarm(wi *warmInstance) {
	ew, ok := s.cfg.Runtime.(engineWatcher)
	if !ok {
		return
	}
	ctx, cancel := context.WithCancel(s.ctx)
	exited, err := ew.WatchExit(ctx, wi.sandbox().InstanceID())
	if err != nil {
		cancel()
		return
	}
	wi.stopWatch = cancel
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		select {
		case <-ctx.Done():
		case <-exited:
			if s.warm.remove(wi) {
				s.log.Warn("a warm instance's engine exited; replacing it", "instance", wi.ID, "image", wi.Image)
				s.discardWarm(context.WithoutCancel(ctx), wi, "engine exited")
				s.warm.wake()
			}
		}
	}()
}

// drainWarm removes every ready instance: at Close, since pool
// instances, unlike sandboxes, are not kept across dend restarts.
func (s *Service) drainWarm(ctx context.Context) {
	if s.warm == nil {
		return
	}
	w := s.warm
	w.mu.Lock()
	var all []*warmInstance
	for im, l := range w.ready {
		all = append(all, l...)
		delete(w.ready, im)
	}
	w.mu.Unlock()
	for _, wi := range all {
		s.discardWarm(ctx, wi, "dend stopping")
	}
}

// allocSandboxSlot hands a sandbox a network slot, taking one back from
// the warm pools when they hold the last ones: a sandbox comes before an
// instance kept for one.
func (s *Service) allocSandboxSlot(ctx context.Context, id string) (int, error) {
	slot, err := s.allocSlot(id)
	if err == nil || s.warm == nil {
		return slot, err
	}
	w := s.warm
	w.mu.Lock()
	var oldest *warmInstance
	for _, l := range w.ready {
		if len(l) > 0 && (oldest == nil || l[0].BootedAt.Before(oldest.BootedAt)) {
			oldest = l[0]
		}
	}
	w.mu.Unlock()
	if oldest == nil || !w.remove(oldest) {
		return slot, err
	}
	s.discardWarm(context.WithoutCancel(ctx), oldest, "its address is needed by a sandbox")
	return s.allocSlot(id)
}
