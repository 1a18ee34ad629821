package network

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
	"github.com/den-dev/den/cmd/den/internal/cli"
)

func (a *app) peerCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "peer COMMAND",
		Short: "Give a sandbox a read-only view of another sandbox's files",
		Long: `Give a sandbox (NAME) a read-only view of another sandbox's files (OTHER):
a snapshot of them taken when the view is added or refreshed (or of one of
OTHER's checkpoints), or with --live OTHER's files as they are, mounted
read-only inside NAME at /peers/OTHER or --at. Writes there fail (read-only
file system). OTHER is only read: it never sees NAME, and removing OTHER
leaves NAME's snapshot view as it was. You can only view sandboxes you may
read yourself.

A view under /peers appears, changes and goes while NAME runs or is paused:
its processes keep running. A view elsewhere (--at) is mounted when NAME
boots: a running or paused NAME's change only with --restart, which stops and
boots it again (its processes end, its files stay). A hibernated NAME's views
do not change (resume it first). Hibernating and waking NAME keep its views; its checkpoints record
its peers but not the views' bytes, and a memory checkpoint restores only
while NAME has views at the same mount points. Forks of NAME get their own
copies of its views. At most 8 views per sandbox.`,
		Example: `  den peer add reviewer coder
  den exec reviewer -- ls /peers/coder
  den peer refresh reviewer coder
  den peer add reviewer coder --live --at /peers/coder-live
  den peer add reviewer coder --checkpoint v1 --at /peers/coder-v1
  den peer ls reviewer
  den peer rm reviewer coder`,
		Args: cli.Subcommands("peer", "add, refresh, rm, ls"),
		RunE: func(*cobra.Command, []string) error { return nil },
	}
	cmd.AddCommand(a.peerAddCommand(), a.peerRefreshCommand(), a.peerRmCommand(), a.peerLsCommand())
	return cmd
}

func (a *app) peerAddCommand() *cobra.Command {
	var req api.AddPeerRequest
	cmd := &cobra.Command{
		Use:   "add NAME OTHER",
		Short: "Give NAME a read-only view of OTHER's files",
		Long: `Give NAME a read-only view of OTHER's files as they are now (OTHER is synced
first if it runs), of OTHER's checkpoint --checkpoint, or with --live of
OTHER's files as they are at every read, without a refresh. It appears at
/peers/OTHER or --at (an absolute path, without "..", not on another view's
path nor on den's own mounts such as /proc or /.den).`,
		Example: `  den peer add reviewer coder
  den peer add reviewer coder --live --at /peers/coder-live
  den peer add reviewer coder --checkpoint v1 --at /review/base --restart`,
		Args: cli.Args("NAME", "OTHER"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.Client()
			if err != nil {
				return err
			}
			req.Sandbox = args[1]
			p, err := c.AddPeer(cmd.Context(), args[0], req)
			if err != nil {
				return err
			}
			return a.printPeer(cmd, c, p, args[0], "added", req.Restart)
		},
	}
	cmd.Flags().StringVar(&req.Checkpoint, "checkpoint", "", "show this checkpoint of OTHER (id or name) instead of its files now")
	cmd.Flags().StringVar(&req.At, "at", "", "mount point inside NAME (default /peers/OTHER)")
	cmd.Flags().BoolVar(&req.Live, "live", false, "show OTHER's files as they are at every read, not a snapshot")
	cmd.Flags().BoolVar(&req.Restart, "restart", false, "restart a running or paused NAME to apply it (its processes end, its files stay); only needed for a view outside /peers")
	return cmd
}

func (a *app) peerRefreshCommand() *cobra.Command {
	var req api.RefreshPeerRequest
	cmd := &cobra.Command{
		Use:   "refresh NAME PEER",
		Short: "Take a view again: OTHER's files as they are now",
		Long: `Take view PEER of NAME again, showing OTHER's files as they are now, or its
checkpoint --checkpoint. PEER is OTHER's name, the view's mount point, or
its id (as ` + "`den peer ls`" + ` shows).`,
		Example: `  den peer refresh reviewer coder
  den peer refresh reviewer /review/base --checkpoint v2 --restart`,
		Args: cli.Args("NAME", "PEER"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.Client()
			if err != nil {
				return err
			}
			ref, err := peerRef(cmd, c, args[0], args[1])
			if err != nil {
				return err
			}
			p, err := c.RefreshPeer(cmd.Context(), args[0], ref, req)
			if err != nil {
				return err
			}
			return a.printPeer(cmd, c, p, args[0], "refreshed", req.Restart)
		},
	}
	cmd.Flags().StringVar(&req.Checkpoint, "checkpoint", "", "show this checkpoint of OTHER instead of its files now")
	cmd.Flags().BoolVar(&req.Restart, "restart", false, "restart a running or paused NAME to apply it (its processes end, its files stay); only needed for a view outside /peers")
	return cmd
}

func (a *app) peerRmCommand() *cobra.Command {
	var restart bool
	cmd := &cobra.Command{
		Use:     "rm NAME PEER",
		Aliases: []string{"remove"},
		Short:   "Take a view away from NAME",
		Long: `Take view PEER away from NAME and remove its snapshot. PEER is OTHER's name,
the view's mount point, or its id.`,
		Example: `  den peer rm reviewer coder`,
		Args:    cli.Args("NAME", "PEER"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.Client()
			if err != nil {
				return err
			}
			ref, err := peerRef(cmd, c, args[0], args[1])
			if err != nil {
				return err
			}
			if err := c.RemovePeer(cmd.Context(), args[0], ref, restart); err != nil {
				return err
			}
			if !a.JSON {
				fmt.Fprintln(a.Stdout, args[1])
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&restart, "restart", false, "restart a running or paused NAME to unmount it (its processes end, its files stay); only needed for a view outside /peers")
	return cmd
}

func (a *app) peerLsCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "ls NAME",
		Aliases: []string{"list"},
		Short:   "List NAME's views of other sandboxes",
		Example: `  den peer ls reviewer
  den peer ls reviewer --json`,
		Args: cli.Args("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.Client()
			if err != nil {
				return err
			}
			ps, err := c.Peers(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return cli.PrintList(a.App, ps, func() error {
				now := time.Now()
				t := cli.NewTable(a.Stdout, "ID", "SANDBOX", "AT", "SHOWS", "TAKEN")
				for _, p := range ps {
					shows := "files"
					if p.Live {
						shows = "files, live"
					}
					if p.Checkpoint != "" {
						shows = "checkpoint " + p.Checkpoint
					}
					t.Row(p.ID, p.Sandbox, p.At, shows, cli.Ago(p.TakenAt, now))
				}
				return t.Flush()
			})
		},
	}
}

// peerRef turns a mount point into the view's id, which the API takes
// in its path; a name or id goes as it is.
func peerRef(cmd *cobra.Command, c *client.Client, name, ref string) (string, error) {
	if !strings.HasPrefix(ref, "/") {
		return ref, nil
	}
	ps, err := c.Peers(cmd.Context(), name)
	if err != nil {
		return "", err
	}
	for _, p := range ps {
		if p.At == ref {
			return p.ID, nil
		}
	}
	return "", cli.Usagef("list its views with `den peer ls "+name+"`", "sandbox %s has no view at %s", name, ref)
}

func (a *app) printPeer(cmd *cobra.Command, c *client.Client, p *api.Peer, name, what string, restarted bool) error {
	if a.JSON {
		return cli.PrintJSON(a.Stdout, p)
	}
	shows := p.Sandbox + "'s files"
	if p.Live {
		shows += ", live"
	}
	if p.Checkpoint != "" {
		shows = "checkpoint " + p.Checkpoint + " of " + p.Sandbox
	}
	fmt.Fprintf(a.Stdout, "%s view %s of %s at %s, read-only\n", what, p.ID, shows, p.At)
	sb, err := c.GetSandbox(cmd.Context(), name)
	if err != nil {
		return err
	}
	switch {
	case sb.State != "running" && sb.State != "paused":
		fmt.Fprintf(a.Stdout, "%s is %s; the view is mounted when it starts\n", name, sb.State)
	case restarted:
		fmt.Fprintf(a.Stdout, "%s runs with it as generation %d (restarted: its processes were ended)\n", name, sb.Generation)
	default:
		fmt.Fprintf(a.Stdout, "%s sees it now; its processes kept running\n", name)
	}
	return nil
}
