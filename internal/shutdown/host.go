package shutdown

import (
	"context"
	"os/exec"
	"strings"
	"time"
)

// HostStopping reports whether the host is shutting down (a reboot, a
// power-off, a halt), as its service manager says: systemd's
// `is-system-running` answers "stopping" from the moment the shutdown
// begins. A host without systemd, or a systemd that does not answer in a
// few seconds, is taken as staying up, and dend's sandboxes are left
// running as on any other stop.
func HostStopping(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	// It exits non-zero for every state but "running": only what it
	// prints counts.
	out, _ := exec.CommandContext(ctx, "systemctl", "is-system-running").Output()
	return IsStopping(string(out))
}

// IsStopping reports whether systemctl is-system-running's answer means a
// shutdown.
func IsStopping(answer string) bool {
	return strings.TrimSpace(answer) == "stopping"
}
