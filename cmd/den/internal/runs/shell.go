package runs

import (
	"fmt"
	"os"
	"os/signal"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"
	"golang.org/x/term"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/cmd/den/internal/cli"
)

// defaultShell starts bash where the image has it, else sh; as a login
// shell, so the image's profile sets PATH and the prompt. (A plain
// `exec bash || exec sh` would not do: a POSIX shell exits when exec
// cannot find its command.)
var defaultShell = []string{"/bin/sh", "-c", "if command -v bash >/dev/null 2>&1; then exec bash -l; else exec sh -l; fi"}

func (a *app) shellCommand() *cobra.Command {
	var (
		user, workdir string
		env           []string
	)
	cmd := &cobra.Command{
		Use:   "shell NAME [CMD [ARG...]]",
		Short: "Open an interactive terminal in a sandbox",
		Long: `Open an interactive terminal in a sandbox: bash if the image has it, else sh,
or the command given. The local terminal is switched to raw mode while it runs
and restored when it ends; resizing the window resizes the remote terminal.`,
		Example: `  den shell web
  den shell web --user nobody
  den shell web python3`,
		Args: cli.AtLeast("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			envm, err := cli.ParseKeyValues("--env", env, a.Getenv)
			if err != nil {
				return err
			}
			if envm == nil {
				envm = map[string]string{}
			}
			if _, ok := envm["TERM"]; !ok {
				envm["TERM"] = a.Getenv("TERM")
				if envm["TERM"] == "" {
					envm["TERM"] = "xterm-256color"
				}
			}
			argv := defaultShell
			if len(args) > 1 {
				argv = args[1:]
			}
			c, err := a.Client()
			if err != nil {
				return err
			}
			req := api.ExecRequest{Argv: argv, Env: envm, User: user, Cwd: workdir, TTY: true}
			return a.attach(cmd.Context(), c, args[0], req, true)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&user, "user", "u", "", "user to run as: name, uid or uid:gid (default root)")
	f.StringVarP(&workdir, "workdir", "w", "", "working directory inside the sandbox (absolute)")
	f.StringArrayVarP(&env, "env", "e", nil, "environment variable K=V; repeatable")
	return cmd
}

// localTTY is the local terminal while a remote one is attached to it.
type localTTY struct {
	rows, cols uint16
	resize     chan api.Resize
	close      func() // restores the terminal and stops watching its size
}

// openTTY measures the local terminal, switches it to raw mode when input
// is sent to the remote terminal, and watches for SIGWINCH. Without a
// local terminal it does nothing (the remote one gets a default size).
func (a *app) openTTY(raw bool) (*localTTY, error) {
	t := &localTTY{close: func() {}}
	var fd int
	switch {
	case cli.IsTerminal(a.Stdin):
		fd = cli.FdOf(a.Stdin)
	case cli.IsTerminal(a.Stdout):
		fd = cli.FdOf(a.Stdout)
	default:
		return t, nil
	}
	if w, h, err := term.GetSize(fd); err == nil {
		t.cols, t.rows = uint16(w), uint16(h)
	}
	var restore func()
	if raw && cli.IsTerminal(a.Stdin) {
		state, err := term.MakeRaw(fd)
		if err != nil {
			return nil, fmt.Errorf("switching the terminal to raw mode: %w", err)
		}
		restore = func() { _ = term.Restore(fd, state) }
	}

	t.resize = make(chan api.Resize, 1)
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, unix.SIGWINCH)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case <-winch:
			}
			w, h, err := term.GetSize(fd)
			if err != nil {
				continue
			}
			sz := api.Resize{Rows: uint16(h), Cols: uint16(w)}
			select { // keep only the latest size
			case <-t.resize:
			default:
			}
			t.resize <- sz
		}
	}()
	t.close = func() {
		signal.Stop(winch)
		close(done)
		if restore != nil {
			restore()
		}
	}
	return t, nil
}
