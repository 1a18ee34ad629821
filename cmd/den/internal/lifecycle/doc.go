// Package lifecycle holds den's verbs of a sandbox's life: create, ls,
// inspect, start, stop, rm, pause, resume, hibernate, policy, recover,
// limits and events.
//
// It never imports cmd/den: the root command puts it together with the
// other groups; what the groups share is in package cli.
package lifecycle

import (
	"github.com/spf13/cobra"

	"github.com/den-dev/den/cmd/den/internal/cli"
)

// app is den's invocation, with this group's commands as its methods.
type app struct{ *cli.App }

// Commands are the group's commands, for the root command.
func Commands(c *cli.App) []*cobra.Command {
	a := &app{c}
	return []*cobra.Command{a.createCommand(), a.lsCommand(), a.inspectCommand(), a.startCommand(), a.stopCommand(), a.rmCommand(), a.pauseCommand(), a.resumeCommand(), a.hibernateCommand(), a.policyCommand(), a.recoverCommand(), a.limitsCommand(), a.eventsCommand()}
}
