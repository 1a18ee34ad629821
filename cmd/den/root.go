// Command den is the command-line client of dend: docker-like verbs to
// create sandboxes, run commands in them, copy files and manage images.
// It talks to dend only through the Go SDK in package client.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/den-dev/den/client"
)

// version is stamped at build time with -ldflags "-X main.version=...";
// without it, the module version from the build info is used.
var version = ""

func main() {
	a := &app{
		stdin:  os.Stdin,
		stdout: os.Stdout,
		stderr: os.Stderr,
		getenv: os.Getenv,
	}
	os.Exit(a.run(context.Background(), os.Args[1:]))
}

// app is one invocation of den: its streams, global flags and client.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string

	// global flags
	socket, host, token string
	jsonOut, debug      bool

	// skew is dend's release as its answers named it (version.go).
	skew skew
}

// Errors that decide the exit status.
type (
	// usageError is a mistake in the command line: exit status 2.
	usageError struct{ msg, hint string }
	// exitError ends den with a status and no message (the command run
	// by `den exec` already said what happened).
	exitError struct{ code int }
	// hintedError is an error of den's own with a hint for the user.
	hintedError struct {
		err  error
		hint string
	}
)

func (e *usageError) Error() string  { return e.msg }
func (e *exitError) Error() string   { return fmt.Sprintf("exit status %d", e.code) }
func (e *hintedError) Error() string { return e.err.Error() }
func (e *hintedError) Unwrap() error { return e.err }

func usagef(hint, format string, a ...any) error {
	return &usageError{msg: fmt.Sprintf(format, a...), hint: hint}
}

func withHint(err error, hint string) error { return &hintedError{err: err, hint: hint} }

// hintOf returns the hint for err: den's own, or the one dend sent.
func hintOf(err error) string {
	var u *usageError
	if errors.As(err, &u) {
		return u.hint
	}
	var h *hintedError
	if errors.As(err, &h) {
		return h.hint
	}
	return client.Hint(err)
}

// run executes den with args and returns the exit status.
func (a *app) run(ctx context.Context, args []string) int {
	root := a.rootCommand()
	root.SetArgs(args)
	root.SetIn(a.stdin)
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	if isCobraUsageError(err) {
		err = unknownCommand(err)
	}
	if errors.Is(err, client.ErrUnknownCall) {
		err = a.unknownCall(ctx, err)
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	fmt.Fprintf(a.stderr, "den: %s\n", err)
	if hint := hintOf(err); hint != "" {
		fmt.Fprintf(a.stderr, "hint: %s\n", hint)
	}
	if a.debug {
		var ce *client.Error
		if errors.As(err, &ce) {
			fmt.Fprintf(a.stderr, "debug: HTTP status %d, code %s\n", ce.StatusCode, ce.Code())
		}
	}
	var ue *usageError
	if errors.As(err, &ue) {
		return 2
	}
	return 1
}

// isCobraUsageError recognises the errors cobra makes itself for an
// unknown command.
func isCobraUsageError(err error) bool {
	return strings.HasPrefix(err.Error(), "unknown command ")
}

// unknownCommand rewrites cobra's unknown-command error, which spreads
// its suggestions over several lines, as a message and a hint.
func unknownCommand(err error) error {
	msg, suggestions, _ := strings.Cut(err.Error(), "\n")
	hint := "see `den --help`"
	if names := strings.Fields(strings.TrimPrefix(strings.TrimSpace(suggestions), "Did you mean this?")); len(names) > 0 {
		hint = "did you mean `den " + strings.Join(names, "` or `den ") + "`? " + hint
	}
	return usagef(hint, "%s", msg)
}

func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "den",
		Short: "Durable Linux sandboxes for AI agents",
		Long: `den drives dend, the sandbox daemon: create durable Linux sandboxes, run
commands in them, copy files in and out, let them sleep when idle, checkpoint,
rewind and fork them, and manage the images they start from.

den talks to dend over its unix socket (` + client.DefaultSocket + `, root only), or over
TCP with --host and a token from DEN_TOKEN.`,
		Example: `  den create web --image debian
  den exec web -- uname -a
  den shell web
  den cp ./app web:/srv/app
  den checkpoint web --name base && den fork web try --from base
  den ls`,
		SilenceErrors:     true,
		SilenceUsage:      true,
		CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: true},
	}
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		hint := "see `" + cmd.CommandPath() + " --help`"
		switch {
		case cmd.Name() == "exec":
			hint = "write the command after --, e.g. `den exec NAME -- ls -la`"
		case strings.Contains(err.Error(), "time: ") && strings.Contains(err.Error(), "duration"):
			hint = "write durations like 90s, 15m or 2h (no days: 168h is a week); 0 turns the step off"
		}
		return usagef(hint, "%s", err)
	})
	f := root.PersistentFlags()
	f.StringVar(&a.socket, "socket", "", "dend's unix socket (env DEN_SOCKET; default "+client.DefaultSocket+")")
	f.StringVar(&a.host, "host", "", "dend's TCP address, e.g. http://10.0.0.5:7070 (env DEN_HOST)")
	f.StringVar(&a.token, "token", "", "bearer token for --host (env DEN_TOKEN)")
	f.BoolVar(&a.jsonOut, "json", false, "print JSON instead of tables and text")
	f.BoolVar(&a.debug, "debug", false, "log every request to dend on stderr")

	root.AddCommand(
		a.createCommand(), a.lsCommand(), a.inspectCommand(),
		a.startCommand(), a.stopCommand(), a.rmCommand(),
		a.pauseCommand(), a.resumeCommand(), a.hibernateCommand(), a.policyCommand(), a.recoverCommand(), a.moveCommand(),
		a.networkCommand(), a.limitsCommand(), a.portCommand(), a.peerCommand(), a.serviceCommand(),
		a.checkpointCommand(), a.checkpointsCommand(), a.restoreCommand(), a.forkCommand(),
		a.setupCommand(), a.rebaseCommand(), a.harnessCommand(), a.exportCommand(), a.importCommand(),
		a.execCommand(), a.shellCommand(), a.cpCommand(),
		a.runsCommand(), a.logsCommand(), a.topCommand(), a.eventsCommand(),
		a.imageCommand(), a.tokenCommand(), a.sshKeyCommand(), a.ownerCommand(), a.nodeCommand(), a.auditCommand(), a.secretCommand(), a.mcpCommand(), a.adminCommand(), a.versionCommand(), a.completionCommand(root), a.manCommand(root),
	)
	return root
}

// client returns a client configured by the global flags, then the
// environment: --host, --socket, DEN_HOST, DEN_SOCKET, the default socket.
func (a *app) client() (*client.Client, error) {
	opts := []client.Option{
		client.WithUserAgent("den/" + clientVersion()),
		client.WithServerVersion(a.heardServer),
		// A change whose connection drops is asked after until dend
		// answers; the user hears that it happened and how it ended
		// (its failure, as den's error).
		client.WithReconnect(client.DefaultReconnect, func(msg string) { fmt.Fprintf(a.stderr, "den: %s\n", msg) }),
	}
	if a.debug {
		log := slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
		opts = append(opts, client.WithLogger(log))
	}
	token := a.token
	if token == "" {
		token = a.getenv("DEN_TOKEN")
	}
	switch {
	case a.host != "":
		opts = append(opts, client.WithHost(a.host, token))
	case a.socket != "":
		opts = append(opts, client.WithSocket(a.socket))
	case a.getenv("DEN_HOST") != "":
		opts = append(opts, client.WithHost(a.getenv("DEN_HOST"), token))
	case a.getenv("DEN_SOCKET") != "":
		opts = append(opts, client.WithSocket(a.getenv("DEN_SOCKET")))
	}
	c, err := client.New(opts...)
	if err != nil {
		return nil, withHint(err, "check --host/DEN_HOST")
	}
	return c, nil
}

// args returns a validator for exactly the named positional arguments.
func args(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < len(names) {
			return usagef("usage: "+cmd.UseLine(), "missing %s", strings.Join(names[len(args):], " and "))
		}
		if len(args) > len(names) {
			return usagef("usage: "+cmd.UseLine(), "unexpected argument %q", args[len(names)])
		}
		return nil
	}
}

// atLeast returns a validator for at least the named positional arguments
// (more are allowed).
func atLeast(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < len(names) {
			return usagef("usage: "+cmd.UseLine(), "missing %s", strings.Join(names[len(args):], " and "))
		}
		return nil
	}
}
