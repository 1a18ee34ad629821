package runsc

import (
	"context"
	"fmt"

	"github.com/den-dev/den/internal/guest"
	"github.com/den-dev/den/internal/sandbox"
)

var _ sandbox.ViewBinder = (*Runtime)(nil)

// BindViews has den-init in running instance id bind views onto their
// mount points (each view's Source is a path inside the instance), run
// with CAP_SYS_ADMIN alone added, as SetHostname is: nothing of it stays
// in the sandbox but the mounts.
func (r *Runtime) BindViews(ctx context.Context, id string, views []sandbox.ViewMount) error {
	args := []string{"exec", "--cap", "CAP_SYS_ADMIN", id, InitPath, guest.BindViewsArg}
	for _, v := range views {
		args = append(args, v.Source, v.Destination)
	}
	if _, err := r.run(ctx, id, args...); err != nil {
		return fmt.Errorf("binding the views of %s: %w", id, err)
	}
	return nil
}

// UnbindViews has den-init in running instance id unmount the views at
// the mount points at.
func (r *Runtime) UnbindViews(ctx context.Context, id string, at ...string) error {
	args := append([]string{"exec", "--cap", "CAP_SYS_ADMIN", id, InitPath, guest.UnbindViewsArg}, at...)
	if _, err := r.run(ctx, id, args...); err != nil {
		return fmt.Errorf("unbinding the views of %s: %w", id, err)
	}
	return nil
}
