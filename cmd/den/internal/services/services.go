package services

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
	"github.com/den-dev/den/cmd/den/internal/cli"
	"github.com/den-dev/den/cmd/den/internal/runs"
)

func (a *app) serviceCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "service COMMAND",
		Short: "Declare long-lived processes den keeps running in a sandbox",
		Long: `A service is a long-lived process in a sandbox's record (the agent's loop, an
MCP server, a dev server) that den-init keeps running: it starts the
record's services at every boot (create, start, a cold recover or move, a
rebase once its setup steps ran), in the order they were added, and starts
each again by its restart policy, waiting 1s, then 2s, 4s ... up to 30s
between quick ends (a run that stayed up 10s resets the wait).

Each start is a run labelled service=SVC: ` + "`den runs`" + ` lists it and ` + "`den logs`" + `
prints its output. Hibernation, checkpoints and forks keep running services
as they are, like any other process; a fork's services run on in the fork.
Services get the sandbox's environment but not its secrets.`,
		Example: `  den service add web api --ready-port 8000 -- python3 -m http.server 8000
  den service add web loop --restart on-failure --env MODE=agent -- ./agent.sh
  den service ls web
  den service logs web api -f
  den service restart web api
  den service rm web api`,
		Args: cli.Subcommands("service", "add, ls, rm, restart, logs"),
		RunE: func(*cobra.Command, []string) error { return nil },
	}
	cmd.AddCommand(a.serviceAddCommand(), a.serviceLsCommand(), a.serviceRmCommand(),
		a.serviceRestartCommand(), a.serviceLogsCommand())
	return cmd
}

func (a *app) serviceAddCommand() *cobra.Command {
	var (
		spec api.ServiceSpec
		env  []string
	)
	cmd := &cobra.Command{
		Use:   "add NAME SVC [flags] -- CMD...",
		Short: "Declare a service and start it",
		Long: `Declare service SVC in sandbox NAME's record, running CMD. A running sandbox
starts it at once (a paused or hibernated one is woken); a stopped one at
its next boot. --restart is always (the default), on-failure (after a
non-zero exit or a signal) or never. --ready-port or --ready-cmd tell when
it is ready: ` + "`den service ls`" + ` shows it starting until then.`,
		Example: `  den service add web api --ready-port 8000 -- python3 -m http.server 8000
  den service add web worker --restart on-failure --user app --cwd /app -- ./worker
  den service add web db --ready-cmd 'pg_isready' -- postgres -D /var/lib/pg`,
		Args: func(cmd *cobra.Command, args []string) error {
			if dash := cmd.ArgsLenAtDash(); dash > 2 {
				return cli.Usagef("write den's flags before -- and the command after it: den service add NAME SVC [flags] -- CMD",
					"unexpected argument %q before --", args[2])
			}
			return cli.AtLeast("NAME", "SVC", "CMD")(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if spec.ReadyPort != 0 && (spec.ReadyPort < 1 || spec.ReadyPort > 65535) {
				return cli.Usagef("give a TCP port from 1 to 65535", "--ready-port %d is out of range", spec.ReadyPort)
			}
			var err error
			if spec.Env, err = cli.ParseKeyValues("--env", env, a.Getenv); err != nil {
				return err
			}
			c, err := a.Client()
			if err != nil {
				return err
			}
			spec.Name, spec.Argv = args[1], args[2:]
			svc, err := c.AddService(cmd.Context(), args[0], spec)
			if err != nil {
				return err
			}
			if a.JSON {
				return cli.PrintJSON(a.Stdout, svc)
			}
			fmt.Fprintf(a.Stdout, "service %s added to %s: %s\n", svc.Name, args[0], svc.State)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&spec.User, "user", "u", "", "run as this user (name, uid or uid:gid; default the image's, else root)")
	f.StringVarP(&spec.Cwd, "cwd", "w", "", "working directory (default the image's, else /)")
	f.StringArrayVarP(&env, "env", "e", nil, "set an environment variable, KEY=VALUE or KEY to pass den's own (repeatable)")
	f.StringVar(&spec.Restart, "restart", "always", "when to start it again: always, on-failure or never")
	f.IntVar(&spec.ReadyPort, "ready-port", 0, "it is ready once this TCP port on 127.0.0.1 accepts")
	f.StringVar(&spec.ReadyCmd, "ready-cmd", "", "it is ready once this shell command exits 0")
	cmd.MarkFlagsMutuallyExclusive("ready-port", "ready-cmd")
	return cmd
}

func (a *app) serviceLsCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "ls NAME",
		Aliases: []string{"list"},
		Short:   "List NAME's services and their states",
		Long: `List NAME's services in the order they were added: their state (starting,
running, ready, backoff, exited, failed; while NAME does not run, its own
state), restarts since it booted, how the last run ended, and the run whose
output ` + "`den logs`" + ` prints.`,
		Example: `  den service ls web
  den service ls web --json`,
		Args: cli.Args("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.Client()
			if err != nil {
				return err
			}
			svcs, err := c.Services(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return cli.PrintList(a.App, svcs, func() error {
				now := time.Now()
				t := cli.NewTable(a.Stdout, "SERVICE", "STATE", "PID", "RESTARTS", "LAST EXIT", "RUN", "COMMAND")
				for _, s := range svcs {
					pid := ""
					if s.PID > 0 {
						pid = strconv.Itoa(s.PID)
					}
					t.Row(s.Name, s.State, pid, strconv.Itoa(s.Restarts), lastExit(s.LastExit, now), s.RunID, strings.Join(s.Argv, " "))
				}
				return t.Flush()
			})
		},
	}
}

// lastExit says how a service's last run ended, and when.
func lastExit(ex *api.ServiceExit, now time.Time) string {
	switch {
	case ex == nil:
		return ""
	case ex.Error != "":
		return "not started " + cli.Ago(ex.At, now)
	case ex.Signal != "":
		return "killed (" + ex.Signal + ") " + cli.Ago(ex.At, now)
	default:
		return "exit " + strconv.Itoa(ex.Code) + " " + cli.Ago(ex.At, now)
	}
}

func (a *app) serviceRmCommand() *cobra.Command {
	cmd := a.serviceVerb("rm NAME SVC", "Stop a service and remove it from the record",
		`Stop service SVC (SIGTERM, then SIGKILL after 5 seconds) and remove it from NAME's record.`,
		`  den service rm web api`, (*client.Client).RemoveService)
	cmd.Aliases = []string{"remove"}
	return cmd
}

func (a *app) serviceRestartCommand() *cobra.Command {
	return a.serviceVerb("restart NAME SVC", "Stop a service's run and start it again at once",
		`Stop service SVC's run (SIGTERM, then SIGKILL after 5 seconds) and start it again at once, whatever its policy, also when it had ended.`,
		`  den service restart web api`, (*client.Client).RestartService)
}

// serviceVerb is a command that does verb to service SVC of NAME and
// prints SVC.
func (a *app) serviceVerb(use, short, long, example string, verb func(*client.Client, context.Context, string, string) error) *cobra.Command {
	return &cobra.Command{
		Use: use, Short: short, Long: long, Example: example,
		Args: cli.Args("NAME", "SVC"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.Client()
			if err != nil {
				return err
			}
			if err := verb(c, cmd.Context(), args[0], args[1]); err != nil {
				return err
			}
			if !a.JSON {
				fmt.Fprintln(a.Stdout, args[1])
			}
			return nil
		},
	}
}

func (a *app) serviceLogsCommand() *cobra.Command {
	var follow bool
	cmd := &cobra.Command{
		Use:   "logs NAME SVC",
		Short: "Print the output of a service's current run",
		Long: `Print the output of service SVC's current (or last) run, as ` + "`den logs`" + ` does;
with -f, keep printing until that run ends. Earlier runs are in ` + "`den runs NAME`" + `,
labelled service=SVC.`,
		Example: `  den service logs web api
  den service logs web api -f`,
		Args: cli.Args("NAME", "SVC"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.Client()
			if err != nil {
				return err
			}
			svcs, err := c.Services(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			for _, s := range svcs {
				if s.Name != args[1] {
					continue
				}
				if s.RunID == "" {
					return cli.Usagef("it has none while "+args[0]+" does not run, or before its first start", "service %s has no run yet", args[1])
				}
				return runs.CopyLogs(cmd.Context(), a.App, c, args[0], s.RunID, []string{api.StreamStdout, api.StreamStderr}, 0, follow, true)
			}
			return cli.Usagef("`den service ls "+args[0]+"` lists its services", "sandbox %s has no service %s", args[0], args[1])
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing output until the run ends")
	return cmd
}
