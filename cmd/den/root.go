// Command den is the command-line client of dend: docker-like verbs to
// create sandboxes, run commands in them, copy files and manage images.
// It talks to dend only through the Go SDK in package client.
//
// Its verbs live in command groups under cmd/den/internal (lifecycle,
// checkpoints, runs, files, network, services, access, images, fleet,
// export), each a package of its own; what they share (the client set-up,
// errors, tables and JSON) is package cli. This package holds main, the
// root command that puts the groups together, and its own few verbs.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/den-dev/den/client"
	"github.com/den-dev/den/cmd/den/internal/access"
	"github.com/den-dev/den/cmd/den/internal/checkpoints"
	"github.com/den-dev/den/cmd/den/internal/cli"
	"github.com/den-dev/den/cmd/den/internal/export"
	"github.com/den-dev/den/cmd/den/internal/files"
	"github.com/den-dev/den/cmd/den/internal/fleet"
	"github.com/den-dev/den/cmd/den/internal/images"
	"github.com/den-dev/den/cmd/den/internal/lifecycle"
	"github.com/den-dev/den/cmd/den/internal/network"
	"github.com/den-dev/den/cmd/den/internal/runs"
	"github.com/den-dev/den/cmd/den/internal/services"
)

// version is stamped at build time with -ldflags "-X main.version=...";
// without it, the module version from the build info is used.
var version = ""

func main() {
	a := &cli.App{
		Stdin:   os.Stdin,
		Stdout:  os.Stdout,
		Stderr:  os.Stderr,
		Getenv:  os.Getenv,
		Version: version,
	}
	os.Exit(run(context.Background(), a, os.Args[1:]))
}

// app is one invocation of den, with the root's own commands (version,
// mcp, completion, generate-man) as its methods.
type app struct{ *cli.App }

// run executes den with args and returns the exit status.
func run(ctx context.Context, c *cli.App, args []string) int {
	a := &app{c}
	root := a.rootCommand()
	root.SetArgs(args)
	root.SetIn(a.Stdin)
	root.SetOut(a.Stdout)
	root.SetErr(a.Stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	if isCobraUsageError(err) {
		err = unknownCommand(err)
	}
	if errors.Is(err, client.ErrUnknownCall) {
		err = a.UnknownCall(ctx, err)
	}
	var ee *cli.ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	fmt.Fprintf(a.Stderr, "den: %s\n", err)
	if hint := cli.HintOf(err); hint != "" {
		fmt.Fprintf(a.Stderr, "hint: %s\n", hint)
	}
	if a.Debug {
		var ce *client.Error
		if errors.As(err, &ce) {
			fmt.Fprintf(a.Stderr, "debug: HTTP status %d, code %s\n", ce.StatusCode, ce.Code())
		}
	}
	var ue *cli.UsageError
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
	return cli.Usagef(hint, "%s", msg)
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
		return cli.Usagef(hint, "%s", err)
	})
	f := root.PersistentFlags()
	f.StringVar(&a.Socket, "socket", "", "dend's unix socket (env DEN_SOCKET; default "+client.DefaultSocket+")")
	f.StringVar(&a.Host, "host", "", "dend's TCP address, e.g. http://10.0.0.5:7070 (env DEN_HOST)")
	f.StringVar(&a.Token, "token", "", "bearer token for --host (env DEN_TOKEN)")
	f.BoolVar(&a.JSON, "json", false, "print JSON instead of tables and text")
	f.BoolVar(&a.Debug, "debug", false, "log every request to dend on stderr")

	groups := [][]*cobra.Command{
		lifecycle.Commands(a.App), network.Commands(a.App), services.Commands(a.App),
		checkpoints.Commands(a.App), export.Commands(a.App), runs.Commands(a.App), files.Commands(a.App),
		images.Commands(a.App), access.Commands(a.App), fleet.Commands(a.App),
		{a.mcpCommand(), a.versionCommand(), a.completionCommand(root), a.manCommand(root)},
	}
	for _, g := range groups {
		root.AddCommand(g...)
	}
	return root
}
