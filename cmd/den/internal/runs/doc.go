// Package runs holds den's verbs that run commands in a sandbox and
// read what they did: exec (with its terminal and signals), shell, runs,
// logs and top.
//
// It never imports cmd/den: the root command puts it together with the
// other groups; what the groups share is in package cli.
package runs

import (
	"github.com/spf13/cobra"

	"github.com/den-dev/den/cmd/den/internal/cli"
)

// app is den's invocation, with this group's commands as its methods.
type app struct{ *cli.App }

// Commands are the group's commands, for the root command.
func Commands(c *cli.App) []*cobra.Command {
	a := &app{c}
	return []*cobra.Command{a.execCommand(), a.shellCommand(), a.runsCommand(), a.logsCommand(), a.topCommand()}
}
