// Command den-init is PID 1 inside every den sandbox. It serves the
// den-init protocol (internal/guest/PROTOCOL.md) to the host on
// DEN_INIT_ADDR (default ":49900"), authenticating with DEN_INIT_TOKEN,
// and starts, reaps and buffers the output of every process in the
// sandbox. It is built static: CGO_ENABLED=0 go build ./cmd/den-init.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/den-dev/den/internal/guest"
	"github.com/den-dev/den/internal/initd"
	"github.com/den-dev/den/internal/initd/sudo"
)

// version is stamped at build time: -ldflags "-X main.version=...".
var version = "dev"

// stopGrace is how long processes get to exit on SIGTERM.
const stopGrace = 2 * time.Second

func main() {
	if filepath.Base(os.Args[0]) == "sudo" {
		// sudo in a sandbox is a link to den-init: see sudo.Main.
		os.Exit(sudo.Main(os.Args, os.Stdout, os.Stderr))
	}
	if len(os.Args) > 1 && os.Args[1] == initd.SecretExecArg {
		// Wrapper mode: start a command given secrets (see initd.SecretExec).
		err := initd.SecretExec(os.Args[2:])
		fmt.Fprintf(os.Stderr, "den-init: starting the command: %v\n", err)
		os.Exit(127)
	}
	if len(os.Args) == 3 && os.Args[1] == guest.SetHostnameArg {
		// Run by the host with CAP_SYS_ADMIN when a warm instance is
		// claimed: the sandbox gets its name, as a fresh boot would.
		if err := unix.Sethostname([]byte(os.Args[2])); err != nil {
			fmt.Fprintf(os.Stderr, "den-init: setting the host name: %v\n", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if len(os.Args) > 1 && os.Args[1] == guest.BindViewsArg {
		os.Exit(initd.BindViewsMain(os.Args[2:], os.Stderr)) // run by the host with CAP_SYS_ADMIN
	}
	if len(os.Args) > 1 && os.Args[1] == guest.UnbindViewsArg {
		os.Exit(initd.UnbindViewsMain(os.Args[2:], os.Stderr))
	}
	if len(os.Args) == 2 && os.Args[1] == guest.HostnameHelperArg {
		os.Exit(initd.HostnameHelperMain())
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	if err := run(log); err != nil {
		log.Error("den-init failed", "err", err)
		os.Exit(1)
	}
}

func run(log *slog.Logger) error {
	token := os.Getenv(guest.EnvToken)
	addr := os.Getenv(guest.EnvAddr)
	// Children get the environment of their spec, or ours without these.
	os.Unsetenv(guest.EnvToken)
	os.Unsetenv(guest.EnvAddr)
	if token == "" {
		return fmt.Errorf("%s is not set", guest.EnvToken)
	}
	if addr == "" {
		addr = fmt.Sprintf(":%d", guest.Port)
	}

	pid1 := os.Getpid() == 1 // the sandbox's init: everything in it is ours
	hostnameSocket := ""
	if pid1 {
		// A warm instance is named through the helper it is given.
		hostnameSocket = initd.HostnameSocket
	}
	// Listening first lets dend's first connection in while the server
	// sets itself up: its request is answered as soon as it serves.
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", addr, err)
	}
	srv, err := initd.New(initd.Config{
		Token:          token,
		Logger:         log,
		Version:        version,
		SignalAll:      pid1,
		HostnameSocket: hostnameSocket,
	})
	if err != nil {
		ln.Close()
		return err
	}
	log.Info("serving", "addr", ln.Addr().String(), "version", version, "pid", os.Getpid())

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	if sl, err := sudo.Listen(); err == nil {
		go srv.ServeSudo(sl)
	} else {
		log.Warn("sudo will not work in this sandbox", "err", err)
	}

	select {
	case err := <-served:
		return err
	case sig := <-sigs:
		log.Info("stopping", "signal", sig.String())
		ctx, cancel := context.WithTimeout(context.Background(), 2*stopGrace)
		defer cancel()
		srv.Shutdown(ctx, stopGrace)
		return srv.Close()
	}
}
