package services

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/cmd/den/internal/cli"
)

func (a *app) harnessCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "harness COMMAND",
		Short: "Set, show or remove a sandbox's harness: the agent program, apart from its environment",
		Long: `A sandbox's harness is the agent program, named apart from its environment (the
image, setup steps, kept paths and services that are the agent's): its install
steps, its services and its configuration paths.

` + "`den harness set`" + ` swaps it on the sandbox as it is: no new root, no lost files,
kept paths and history untouched. A files-only checkpoint labelled
pre-harness-gN comes first, so ` + "`den restore NAME pre-harness-gN`" + ` undoes it. A
rebase keeps the harness: it runs its steps after the setup steps and starts
its services with the sandbox's; its config paths are kept as kept paths.`,
		Example: `  den harness set web --step 'pip install my-agent==2' --service 'agent=my-agent serve' --config-path /etc/my-agent
  den harness set web --file harness.json
  den harness show web
  den harness rm web`,
		Args: cli.Subcommands("harness", "set, show, rm"),
		RunE: func(*cobra.Command, []string) error { return nil },
	}
	cmd.AddCommand(a.harnessSetCommand(), a.harnessShowCommand(), a.harnessRmCommand())
	return cmd
}

func (a *app) harnessSetCommand() *cobra.Command {
	var (
		steps, services, paths []string
		file                   string
	)
	cmd := &cobra.Command{
		Use:   "set NAME [--step CMD]... [--service 'SVC=CMD']... [--config-path P]... | --file FILE",
		Short: "Give a sandbox a harness, or swap the one it has, on the sandbox as it is",
		Long: `Give sandbox NAME a harness, replacing the one it has. First a files-only
checkpoint labelled pre-harness-gN; then the old harness's services stop, the
new steps run in order as runs (` + "`den runs NAME`" + ` shows their output), and the
new services start. A paused or hibernated sandbox is woken first; a stopped
one must be started first.

A step that fails leaves the sandbox as it was before: it is booted again from
the checkpoint, with its old harness and services, and den says which step
failed and the end of its output.

--service 'SVC=CMD' runs the shell command CMD as service SVC, restarted
always. For other service settings (user, cwd, env, restart policy, readiness)
give the harness as JSON with --file (- for stdin):

  {"steps": ["pip install my-agent==2"],
   "services": [{"name": "agent", "argv": ["my-agent", "serve"], "ready_port": 8080}],
   "config_paths": ["/etc/my-agent"]}`,
		Example: `  den harness set web --step 'echo B >/opt/harness/version' --service 'agent=python3 -m http.server 8080'
  den harness set web --file harness.json`,
		Args: cli.Args("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			h, err := a.harnessOf(file, steps, services, paths)
			if err != nil {
				return err
			}
			c, err := a.Client()
			if err != nil {
				return err
			}
			res, err := c.SetHarness(cmd.Context(), args[0], h)
			if err != nil {
				return err
			}
			if a.JSON {
				return cli.PrintJSON(a.Stdout, res)
			}
			fmt.Fprintf(a.Stdout, "harness of %s set: %d steps ran, services %s\n", args[0], len(res.Steps), serviceNames(res.Harness))
			fmt.Fprintf(a.Stdout, "  undo with `den restore %s %s`\n", args[0], res.Checkpoint)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&steps, "step", nil, "an install step, a shell command; repeatable, run in order")
	f.StringArrayVar(&services, "service", nil, "a service, SVC=CMD (CMD a shell command); repeatable")
	f.StringArrayVar(&paths, "config-path", nil, "an absolute path where the harness keeps its configuration, kept by a rebase; repeatable")
	f.StringVarP(&file, "file", "f", "", "read the harness as JSON from this file (- for stdin)")
	return cmd
}

// harnessOf is the harness the flags give, or the one in file.
func (a *app) harnessOf(file string, steps, services, paths []string) (api.Harness, error) {
	h := api.Harness{Steps: steps, ConfigPaths: paths}
	if file != "" {
		if len(steps)+len(services)+len(paths) > 0 {
			return h, cli.Usagef("give the whole harness in the file, or with flags", "--file and --step, --service or --config-path contradict each other")
		}
		return a.readHarness(file)
	}
	if len(steps)+len(services)+len(paths) == 0 {
		return h, cli.Usagef("give --step, --service or --config-path, or --file; `den harness rm NAME` removes it", "no harness given")
	}
	for _, s := range services {
		sp, err := parseHarnessService(s)
		if err != nil {
			return h, err
		}
		h.Services = append(h.Services, sp)
	}
	return h, nil
}

// parseHarnessService reads --service SVC=CMD.
func parseHarnessService(s string) (api.ServiceSpec, error) {
	name, command, ok := strings.Cut(s, "=")
	if !ok || name == "" || strings.TrimSpace(command) == "" {
		return api.ServiceSpec{}, cli.Usagef("write it as SVC=CMD, e.g. --service 'agent=python3 -m http.server 8080'", "bad --service %q", s)
	}
	return api.ServiceSpec{Name: name, Argv: []string{"/bin/sh", "-c", command}}, nil
}

func (a *app) readHarness(file string) (api.Harness, error) {
	var h api.Harness
	r := a.Stdin
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return h, fmt.Errorf("reading the harness: %w", err)
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, 1<<20))
	if err != nil {
		return h, fmt.Errorf("reading the harness: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&h); err != nil {
		return h, cli.Usagef(`give it as {"steps": [...], "services": [{"name": ..., "argv": [...]}], "config_paths": [...]}`,
			"reading the harness from %s: %v", file, err)
	}
	return h, nil
}

func serviceNames(h api.Harness) string {
	if len(h.Services) == 0 {
		return "none"
	}
	var names []string
	for _, sp := range h.Services {
		names = append(names, sp.Name)
	}
	return strings.Join(names, " ")
}

func (a *app) harnessShowCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "show NAME",
		Short:   "Print a sandbox's harness",
		Example: "  den harness show web\n  den harness show web --json",
		Args:    cli.Args("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.Client()
			if err != nil {
				return err
			}
			h, err := c.Harness(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if a.JSON {
				return cli.PrintJSON(a.Stdout, h)
			}
			for i, st := range h.Steps {
				fmt.Fprintf(a.Stdout, "step %d: %s\n", i+1, cli.EscapeControl(st))
			}
			for _, sp := range h.Services {
				fmt.Fprintf(a.Stdout, "service %s: %s\n", sp.Name, cli.EscapeControl(strings.Join(sp.Argv, " ")))
			}
			for _, p := range h.ConfigPaths {
				fmt.Fprintf(a.Stdout, "config path: %s\n", p)
			}
			return nil
		},
	}
}

func (a *app) harnessRmCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "rm NAME",
		Aliases: []string{"remove"},
		Short:   "Stop the harness's services and remove it from the record",
		Long: `Stop the harness's services and remove the harness from NAME's record. What
its steps installed stays in the files; a rebase no longer runs them.`,
		Example: "  den harness rm web",
		Args:    cli.Args("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.Client()
			if err != nil {
				return err
			}
			if err := c.RemoveHarness(cmd.Context(), args[0]); err != nil {
				return err
			}
			if !a.JSON {
				fmt.Fprintf(a.Stdout, "harness of %s removed\n", args[0])
			}
			return nil
		},
	}
}
