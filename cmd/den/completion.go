package main

import (
	"github.com/den-dev/den/cmd/den/internal/cli"

	"github.com/spf13/cobra"
)

// completionCommand prints the shell completion script cobra generates
// for den's verbs and flags.
func (a *app) completionCommand(root *cobra.Command) *cobra.Command {
	return &cobra.Command{
		Use:   "completion bash|zsh|fish",
		Short: "Print the shell completion script for bash, zsh or fish",
		Long: `Print a script that completes den's verbs and flags in bash, zsh or fish.
Load it in the current shell, or install it where the shell looks for
completions (make install puts bash's and fish's there).`,
		Example: `  source <(den completion bash)
  den completion bash > /etc/bash_completion.d/den
  den completion zsh > "${fpath[1]}/_den"
  den completion fish > ~/.config/fish/completions/den.fish`,
		ValidArgs: []string{"bash", "zsh", "fish"},
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return cli.Usagef("usage: "+cmd.UseLine(), "name one shell: bash, zsh or fish")
			}
			switch args[0] {
			case "bash", "zsh", "fish":
				return nil
			}
			return cli.Usagef("usage: "+cmd.UseLine(), "unknown shell %q: den completes bash, zsh and fish", args[0])
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			switch args[0] {
			case "bash":
				return root.GenBashCompletionV2(a.Stdout, true)
			case "zsh":
				return root.GenZshCompletion(a.Stdout)
			}
			return root.GenFishCompletion(a.Stdout, true)
		},
	}
}
