package runsc

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/den-dev/den/internal/guest"
	"github.com/den-dev/den/internal/sandbox"
)

var _ sandbox.HostnameSetter = (*Runtime)(nil)

// No process in a sandbox may change its host name (none holds
// CAP_SYS_ADMIN), so a warm-pool instance is named by den-init run
// through runsc exec with that capability alone added: ahead of the
// claim as a helper that waits for the name (StartHostnameHelper), or,
// when that helper is missing, at once (SetHostname). Either exits once
// the name is set: nothing of it stays in the sandbox.

// StartHostnameHelper starts den-init's host name helper in a running
// instance and returns once it runs; a claim hands it the name through
// den-init.
//
// runsc leaves a process on the host that waits for the helper to exit;
// it must not hold a pipe of ours, or this would wait as long: its output
// goes to the instance's log.
func (r *Runtime) StartHostnameHelper(ctx context.Context, id string) error {
	logPath := filepath.Join(r.cfg.LogDir, id+".log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("opening instance log: %w", err)
	}
	defer logf.Close()
	before, _ := logf.Seek(0, io.SeekEnd)
	cmd := r.command(ctx, id, "exec", "--detach", "--cap", "CAP_SYS_ADMIN", id, InitPath, guest.HostnameHelperArg)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("starting the host name helper of %s: %w: %s", id, err, tail(logPath, before))
	}
	return nil
}

// SetHostname gives a running instance a new host name at once, as its
// spec would have at boot.
func (r *Runtime) SetHostname(ctx context.Context, id, name string) error {
	if _, err := r.run(ctx, id, "exec", "--cap", "CAP_SYS_ADMIN", id, InitPath, guest.SetHostnameArg, name); err != nil {
		return fmt.Errorf("setting the host name of %s: %w", id, err)
	}
	return nil
}
