package sandbox

import (
	"context"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// Tearing down in the background. A hibernation is complete once its
// checkpoint is recorded: the save ended the instance's processes. What
// is left, the engine's record of the instance and the sandbox's network
// link and namespace, takes the kernel tens of milliseconds to remove
// (a veth's removal waits for RCU grace periods), which the caller need
// not wait for. So it goes on in the background, and whatever next uses
// the sandbox's instance, network or slot waits for it first (settled):
// attaching the network for a new generation, halting, letting go of a
// sandbox that moved. A dend that dies meanwhile leaves an instance no
// sandbox owns, which the next one removes, and a namespace the next
// attach replaces.

// teardownTimeout bounds a background teardown, which outlives requests
// and a dend shutting down.
const teardownTimeout = time.Minute

// teardownNice is the CPU priority (nice) of a background teardown and of
// the engine processes it starts: starting runsc takes several ms of a
// core, which at the default priority would delay the answer the
// teardown is kept out of the way of, and the verbs of other sandboxes.
// A teardown that is waited for (settled) still runs as soon as a core is
// idle.
const teardownNice = 5

// lowerPriority lowers the CPU priority of the calling goroutine's thread,
// and of every process it starts, to nice. The goroutine keeps the
// thread, which the runtime ends when the goroutine returns: no other
// goroutine runs on it afterwards.
func lowerPriority(nice int) error {
	runtime.LockOSThread()
	// PRIO_PROCESS with who 0 is the calling thread on Linux.
	return unix.Setpriority(unix.PRIO_PROCESS, 0, nice)
}

// tearDownLater removes sb's current instance and network in the
// background.
func (s *Service) tearDownLater(sb *Sandbox) {
	id, name, inst := sb.ID, sb.Name, sb.InstanceID()
	done := make(chan struct{})
	s.mu.Lock()
	prev := s.teardowns[id]
	s.teardowns[id] = done
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer close(done)
		if err := lowerPriority(teardownNice); err != nil {
			s.log.Debug("lowering the priority of a teardown", "err", err)
		}
		if prev != nil {
			<-prev
		}
		ctx, cancel := context.WithTimeout(context.Background(), teardownTimeout)
		defer cancel()
		// The instance's processes stand frozen since the save, so
		// nothing uses the network: it goes while the engine's record does, each
		// taking about as long (a veth's removal waits for the kernel's
		// RCU grace periods, a runsc delete starts a process).
		detached := make(chan struct{})
		go func() {
			defer close(detached)
			if err := s.cfg.Network.Detach(ctx, id); err != nil {
				s.log.Error("detaching network", "sandbox", name, "err", err)
			}
		}()
		if err := s.cfg.Runtime.Destroy(ctx, inst); err != nil {
			s.log.Error("removing a hibernated instance", "sandbox", name, "instance", inst, "err", err)
		}
		<-detached
		s.forgetGuest(inst)
		s.mu.Lock()
		if s.teardowns[id] == done {
			delete(s.teardowns, id)
		}
		s.mu.Unlock()
	}()
}

// settled waits until no teardown of sandbox id is under way.
func (s *Service) settled(ctx context.Context, id string) error {
	s.mu.Lock()
	done := s.teardowns[id]
	s.mu.Unlock()
	if done == nil {
		return nil
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
