package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"net"

	"github.com/den-dev/den/internal/audit"
	"github.com/den-dev/den/internal/auth"
	"github.com/den-dev/den/internal/exposing"
	"github.com/den-dev/den/internal/httpapi"
	"github.com/den-dev/den/internal/sandbox"
	"github.com/den-dev/den/internal/sshgate"
)

// newGate makes the SSH gateway: when dend listens for SSH, and on every
// node of a fleet, where other nodes' gateways relay logins to the
// sandboxes this node runs (fl nil: not in a fleet). nil when neither.
func newGate(cfg Config, fl *fleetNode, svc *sandbox.Service, runs sshgate.Runs, ports *exposing.Ports, logs sshgate.Logs, tokens *auth.Service, log audit.Log, logger *slog.Logger) (*sshgate.Gate, error) {
	if cfg.SSHListen == "" && fl == nil {
		return nil, nil
	}
	key, err := sshgate.LoadHostKey(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	gc := sshgate.Config{HostKey: key, Sandboxes: svc, Runs: runs, Ports: ports, Logs: logs, Keys: tokens, Audit: log, Limits: cfg.SSHLimits, Logger: logger.With("component", "ssh")}
	if fl != nil {
		gc.Relay = fl.forwarder
	}
	return sshgate.New(gc)
}

// sshRelay is gate as the API's door for relayed logins; none without it.
func sshRelay(gate *sshgate.Gate) httpapi.SSHRelay {
	if gate == nil {
		return nil
	}
	return gate
}

// startSSH serves the SSH gateway on cfg.SSHListen until ctx ends; with
// no address it does nothing. The listener is open when it returns, so a
// bad address stops dend from starting.
func startSSH(ctx context.Context, cfg Config, gate *sshgate.Gate, logger *slog.Logger) error {
	if cfg.SSHListen == "" {
		return nil
	}
	l, err := net.Listen("tcp", cfg.SSHListen)
	if err != nil {
		return fmt.Errorf("listening for SSH on %s: %w", cfg.SSHListen, err)
	}
	logger.Info("dend SSH gateway listening", "addr", l.Addr().String(), "host_key", gate.HostKeyFingerprint())
	go func() {
		if err := gate.Serve(ctx, l); err != nil {
			logger.Error("SSH gateway failed", "err", err)
		}
	}()
	return nil
}
