// Package checkpoints holds den's verbs of a sandbox's history:
// checkpoint, checkpoints, restore, fork, and setup and rebase, which
// make a sandbox again on a new image version.
//
// It never imports cmd/den: the root command puts it together with the
// other groups; what the groups share is in package cli.
package checkpoints

import (
	"github.com/spf13/cobra"

	"github.com/den-dev/den/cmd/den/internal/cli"
)

// app is den's invocation, with this group's commands as its methods.
type app struct{ *cli.App }

// Commands are the group's commands, for the root command.
func Commands(c *cli.App) []*cobra.Command {
	a := &app{c}
	return []*cobra.Command{a.checkpointCommand(), a.checkpointsCommand(), a.restoreCommand(), a.forkCommand(), a.setupCommand(), a.rebaseCommand()}
}
