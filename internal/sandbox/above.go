package sandbox

import "context"

// Verbs the layers above the core (internal/fleet) use and nothing in
// the core needs: they run the core's own steps, so that what sits above
// never reaches into the Service's state.

// Go runs f in the background under the Service's lifetime: its ctx ends
// at Close, which waits for f to return.
func (s *Service) Go(f func(ctx context.Context)) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		f(s.ctx)
	}()
}

// LocalSandboxes returns the sandboxes that are not destroyed and are
// this node's: the ones whose instances, files and policy it keeps.
func (s *Service) LocalSandboxes(ctx context.Context) ([]*Sandbox, error) {
	return s.localSandboxes(ctx)
}
