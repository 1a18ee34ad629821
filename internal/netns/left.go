package netns

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/den-dev/den/internal/errdefs"
)

// removeNS removes sandbox id's namespace at path. One that cannot be
// removed now is noted, for the guard to remove later (retryLeft).
func (m *Manager) removeNS(id, path string) error {
	m.leftMu.Lock()
	defer m.leftMu.Unlock()
	if err := removeNamed(path); err != nil {
		if !m.left[path] {
			m.log.Warn("cannot remove a sandbox's network namespace; trying again every few seconds", "sandbox", id, "path", path, "err", err)
		}
		m.left[path] = true
		return err
	}
	delete(m.left, path)
	return nil
}

// retryLeft removes again the namespaces whose removal failed. It holds
// leftMu throughout, so that it never removes a namespace an attach made
// anew at one of their paths.
func (m *Manager) retryLeft() {
	m.leftMu.Lock()
	defer m.leftMu.Unlock()
	for path := range m.left {
		if err := removeNamed(path); err != nil {
			continue
		}
		delete(m.left, path)
		m.log.Info("removed a sandbox's network namespace that could not be removed before", "path", path)
	}
}

// nsError is a Detach that removed everything but a namespace.
type nsError struct {
	id  string
	err error
}

func (e *nsError) Error() string {
	return fmt.Sprintf("removing the network namespace of sandbox %s: %v", e.id, e.err)
}
func (e *nsError) Unwrap() error { return e.err }

// notRemoved is what Attach answers when a namespace an earlier attach
// left cannot be removed: the sandbox cannot have its network until it
// is. The reason is the system's, without the host's paths (the log has
// them); the guard tries the removal again meanwhile.
func notRemoved(err error) error {
	var ne *nsError
	if !errors.As(err, &ne) {
		return err
	}
	why := "see dend's log"
	var errno syscall.Errno
	if errors.As(ne.err, &errno) {
		why = errno.Error()
	}
	return errdefs.WithHint(errdefs.Unavailable("the sandbox's previous network namespace cannot be removed (%s)", why),
		"dend tries again every few seconds: retry shortly; if it persists, dend's log names the namespace's path")
}
