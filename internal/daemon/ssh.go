package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"

	"github.com/den-dev/den/internal/audit"
	"github.com/den-dev/den/internal/auth"
	"github.com/den-dev/den/internal/sandbox"
	"github.com/den-dev/den/internal/sshgate"
)

// startSSH serves the SSH gateway on cfg.SSHListen until ctx ends; with
// no address it does nothing. The listener is open when it returns, so a
// bad address stops dend from starting.
func startSSH(ctx context.Context, cfg Config, svc *sandbox.Service, tokens *auth.Service, log audit.Log, logger *slog.Logger) error {
	if cfg.SSHListen == "" {
		return nil
	}
	key, err := sshgate.LoadHostKey(filepath.Join(cfg.DataDir, sshgate.HostKeyFile))
	if err != nil {
		return err
	}
	gate, err := sshgate.New(sshgate.Config{HostKey: key, Sandboxes: svc, Keys: tokens, Audit: log, Logger: logger.With("component", "ssh")})
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", cfg.SSHListen)
	if err != nil {
		return fmt.Errorf("listening for SSH on %s: %w", cfg.SSHListen, err)
	}
	logger.Info("dend SSH gateway listening", "addr", l.Addr().String(), "host_key", auth.Fingerprint(key.PublicKey()))
	go func() {
		if err := gate.Serve(ctx, l); err != nil {
			logger.Error("SSH gateway failed", "err", err)
		}
	}()
	return nil
}
