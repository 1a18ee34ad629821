package access

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/cmd/den/internal/cli"
	"github.com/den-dev/den/internal/errdefs"
)

func (a *app) secretGrantCommand() *cobra.Command {
	var env, file string
	cmd := &cobra.Command{
		Use:   "grant SANDBOX SECRET",
		Short: "Give a sandbox's commands a secret (admin)",
		Long: `Give every later command in a sandbox a secret, at exec time: as an
environment variable (by default the secret's name, or --env), or as a file
in /run/secrets (--file), an in-memory mount, readable by the command's user
only. The value is never written to the sandbox's disk, to a checkpoint, a
hibernation image or a fork (forks get no secrets unless granted), and the
secret's file is removed before the sandbox is paused or saved; the next
command writes it again. Granting the same secret again replaces its target.`,
		Example: `  den secret grant web GH_TOKEN
  den secret grant web GH_TOKEN --env GITHUB_TOKEN
  den secret grant web TLS_KEY --file key.pem`,
		Args: cli.Args("SANDBOX", "SECRET"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if env != "" && file != "" {
				return cli.Usagef("give --env or --file, not both", "both --env and --file given")
			}
			return a.changeGrants(cmd, args[0], func(gs []api.SecretGrant) []api.SecretGrant {
				gs = slices.DeleteFunc(gs, func(g api.SecretGrant) bool { return g.Name == args[1] })
				return append(gs, api.SecretGrant{Name: args[1], Env: env, File: file})
			})
		},
	}
	cmd.Flags().StringVar(&env, "env", "", "environment variable to put it in (default: the secret's name)")
	cmd.Flags().StringVar(&file, "file", "", "file name in /run/secrets to write it to instead")
	return cmd
}

func (a *app) secretRevokeCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "revoke SANDBOX SECRET",
		Short: "Take a secret away from a sandbox's commands (admin)",
		Long: `Revoke a secret: later commands do not get it, and its file goes from
/run/secrets at once. Commands already running keep what they were given.`,
		Example: "  den secret revoke web GH_TOKEN",
		Args:    cli.Args("SANDBOX", "SECRET"),
		RunE: func(cmd *cobra.Command, args []string) error {
			found := false
			err := a.changeGrants(cmd, args[0], func(gs []api.SecretGrant) []api.SecretGrant {
				n := len(gs)
				gs = slices.DeleteFunc(gs, func(g api.SecretGrant) bool { return g.Name == args[1] })
				found = len(gs) < n
				return gs
			})
			if err == nil && !found {
				return errdefs.WithHint(errdefs.NotFound("secret %s is not granted to sandbox %s", args[1], args[0]),
					"`den inspect "+args[0]+"` lists its secrets")
			}
			return err
		},
	}
}

// changeGrants reads a sandbox's grants, changes them with fn and writes
// them back, printing the result.
func (a *app) changeGrants(cmd *cobra.Command, name string, fn func([]api.SecretGrant) []api.SecretGrant) error {
	c, err := a.Client()
	if err != nil {
		return err
	}
	sb, err := c.GetSandbox(cmd.Context(), name)
	if err != nil {
		return err
	}
	grants := fn(slices.Clone(sb.Secrets))
	if slices.Equal(grants, sb.Secrets) {
		return a.printGrants(sb)
	}
	if sb, err = c.SetSecrets(cmd.Context(), name, grants); err != nil {
		return err
	}
	return a.printGrants(sb)
}

func (a *app) printGrants(sb *api.Sandbox) error {
	if a.JSON {
		return cli.PrintJSON(a.Stdout, sb.Secrets)
	}
	if len(sb.Secrets) == 0 {
		_, err := fmt.Fprintf(a.Stdout, "%s has no secrets\n", sb.Name)
		return err
	}
	var lines []string
	for _, g := range sb.Secrets {
		to := "$" + g.Env
		if g.File != "" {
			to = "/run/secrets/" + g.File
		}
		lines = append(lines, fmt.Sprintf("%-24s %s", g.Name, to))
	}
	_, err := fmt.Fprintln(a.Stdout, strings.Join(lines, "\n"))
	return err
}

// ParseGrants reads --secret NAME[=VAR] and --secret-file NAME[=FILE].
func ParseGrants(envs, files []string) []api.SecretGrant {
	var out []api.SecretGrant
	for _, s := range envs {
		name, env, _ := strings.Cut(s, "=")
		out = append(out, api.SecretGrant{Name: name, Env: env})
	}
	for _, s := range files {
		name, file, ok := strings.Cut(s, "=")
		if !ok {
			file = name
		}
		out = append(out, api.SecretGrant{Name: name, File: file})
	}
	return out
}
