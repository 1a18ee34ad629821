package main

import (
	"github.com/den-dev/den/cmd/den/internal/cli"

	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

// manCommand writes den's man pages, den(1) and one den-VERB(1) per
// command, into a directory: `make dist` ships them in the release.
// Hidden, as users read the pages rather than make them.
func (a *app) manCommand(root *cobra.Command) *cobra.Command {
	return &cobra.Command{
		Use:    "generate-man DIR",
		Short:  "Write den's man pages into DIR",
		Hidden: true,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return cli.Usagef("usage: "+cmd.UseLine(), "name the directory to write the pages into")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := os.MkdirAll(args[0], 0o755); err != nil {
				return fmt.Errorf("making the man page directory: %w", err)
			}
			header := &doc.GenManHeader{
				Title:   "DEN",
				Section: "1",
				Source:  "den " + a.ClientVersion(),
				Manual:  "den manual",
			}
			root.DisableAutoGenTag = true
			if err := doc.GenManTree(root, header, args[0]); err != nil {
				return fmt.Errorf("writing den's man pages: %w", err)
			}
			return nil
		},
	}
}
