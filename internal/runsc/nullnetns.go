package runsc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// nullNetNS is where runsc pins, under its root, the empty network
// namespace its gofers join (runsc/specutils.NullNetNSFilename): an nsfs
// bind mount that keeps the namespace alive after the gofers are gone.
const nullNetNS = "null-netns"

// Close lets go of what runsc keeps on the host for this dend once no
// instance is left: the pinned empty network namespace. With instances
// running it stays, for the next dend's gofers to join.
func (r *Runtime) Close(ctx context.Context) error {
	ids, err := r.List(ctx)
	if err != nil {
		return fmt.Errorf("closing the engine: %w", err)
	}
	if len(ids) > 0 {
		return nil
	}
	path := filepath.Join(r.cfg.Root, nullNetNS)
	// Gofers made concurrently may have stacked several mounts there.
	for unix.Unmount(path, unix.MNT_DETACH) == nil {
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing runsc's empty network namespace %s: %w", path, err)
	}
	return nil
}
