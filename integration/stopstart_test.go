package integration

import (
	"errors"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// A dend asked to stop (SIGTERM: `systemctl stop`, a power-off) while it
// is still starting exits 0, as a stop once it runs does: systemd would
// otherwise record the unit failed ("Failed with result 'exit-code'").
// The signal comes at several moments of the start; one before dend
// listens for it ends dend by the signal, which systemd counts clean too.
func TestStopWhileStartingExitsZero(t *testing.T) {
	for _, delay := range []time.Duration{20 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond} {
		base := t.TempDir()
		cmd := exec.Command(filepath.Join(binDir, "dend"), "--data-dir", filepath.Join(base, "data"), "--run-dir", filepath.Join(base, "run"),
			"--socket", filepath.Join(base, "den.sock"), "--subnet", testSubnet(), "--pool-size", "2G", "--dns-upstream", "127.0.0.1:9")
		out := &syncBuffer{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(delay)
		cmd.Process.Signal(syscall.SIGTERM)
		err := cmd.Wait()
		unmountUnder(t, base)
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGTERM {
				continue // before dend listened for the signal
			}
			t.Errorf("SIGTERM %v after start: dend exited %v:\n%s", delay, err, tail(out.String(), 1500))
		} else if err != nil {
			t.Fatal(err)
		}
	}
}
