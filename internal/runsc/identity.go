package runsc

import (
	"context"
	"fmt"

	"github.com/den-dev/den/internal/guest"
	"github.com/den-dev/den/internal/sandbox"
)

var _ sandbox.HostnameSetter = (*Runtime)(nil)

// SetHostname gives a running instance a new host name, as its spec
// would have at boot. No process in a sandbox may change it (none holds
// CAP_SYS_ADMIN), so den-init's one-shot mode runs once through runsc
// exec with that capability alone added, and exits: nothing of it stays
// in the sandbox. A warm-pool instance takes its sandbox's name this way.
func (r *Runtime) SetHostname(ctx context.Context, id, name string) error {
	if _, err := r.run(ctx, id, "exec", "--cap", "CAP_SYS_ADMIN", id, InitPath, guest.SetHostnameArg, name); err != nil {
		return fmt.Errorf("setting the host name of %s: %w", id, err)
	}
	return nil
}
