package fleet

import (
	"fmt"
	"io"
	"time"

	"github.com/docker/go-units"
	"github.com/spf13/cobra"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/cmd/den/internal/cli"
)

func (a *app) nodeCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "node COMMAND",
		Short: "The nodes of a fleet (admin)",
		Long: `Several dends sharing one PostgreSQL database (dend --store postgres://...)
are one fleet: each is a node, named by dend --node (default: the host's
name), that keeps a lease by heartbeat. Any node answers for every sandbox,
forwarding requests to the node a sandbox is on. A node whose lease runs out
is lost. A dend on SQLite is a fleet of one.`,
		Example: `  den node ls
  den node drain node-b
  den node activate node-b
  den node rm node-c`,
		Args: cli.Subcommands("node", "ls, drain, activate, rm"),
		RunE: func(*cobra.Command, []string) error { return nil },
	}
	cmd.AddCommand(a.nodeLsCommand(), a.nodeDrainCommand(), a.nodeActivateCommand(), a.nodeRmCommand())
	return cmd
}

func (a *app) nodeLsCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List the nodes with their state, lease and resources",
		Example: "  den node ls\n  den node ls --json",
		Args:    cli.Args(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.Client()
			if err != nil {
				return err
			}
			l, err := c.Nodes(cmd.Context())
			if err != nil {
				return err
			}
			return cli.PrintList(a.App, l.Nodes, func() error { return renderNodes(a.Stdout, l.Nodes, time.Now()) })
		},
	}
}

func renderNodes(w io.Writer, nodes []api.Node, now time.Time) error {
	t := cli.NewTable(w, "NODE", "STATE", "SANDBOXES", "CPUS", "MEMORY", "DISK FREE", "HEARTBEAT", "PEER", "RUNSC")
	for _, n := range nodes {
		name, beat, peer := n.Name, "-", n.PeerURL
		if n.Self {
			name += " (this)"
		}
		if n.HeartbeatAt != nil {
			beat = cli.Ago(*n.HeartbeatAt, now)
		}
		if peer == "" {
			peer = "-"
		}
		state := n.State
		if n.Reason != "" {
			state += ": " + n.Reason
		}
		t.Row(name, state, fmt.Sprint(n.Sandboxes), fmt.Sprint(n.CPUs), units.BytesSize(float64(n.MemoryBytes)),
			units.BytesSize(float64(n.DiskFreeBytes)), beat, peer, n.RunscVersion)
	}
	return t.Flush()
}

func (a *app) nodeDrainCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "drain NODE",
		Short: "Stop placing sandboxes on a node and move its sandboxes away",
		Long: `The node stops taking new sandboxes and, one at a time, moves every sandbox it
runs or holds paused to the least committed other node, processes intact
(with a blob store, dend --blobs); without one, or when no node can take it,
it hibernates it to wake on its next use. Undo with den node activate.`,
		Example: "  den node drain node-b",
		Args:    cli.Args("NODE"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			c, err := a.Client()
			if err != nil {
				return err
			}
			res, err := c.DrainNode(cmd.Context(), argv[0])
			if err != nil {
				return err
			}
			if a.JSON {
				return cli.PrintJSON(a.Stdout, res)
			}
			fmt.Fprintf(a.Stdout, "node %s is draining: %d sandboxes moved, %d hibernated\n", res.Node.Name, len(res.Moved), len(res.Hibernated))
			for _, m := range res.Moved {
				fmt.Fprintf(a.Stdout, "  %s: moved to node %s\n", m.Sandbox, m.To)
			}
			for _, f := range res.Failed {
				fmt.Fprintf(a.Stdout, "  %s: not hibernated: %s\n", f.Sandbox, f.Error)
			}
			if len(res.Failed) > 0 {
				return fmt.Errorf("%d sandboxes of node %s could not be hibernated; see above, then drain again", len(res.Failed), res.Node.Name)
			}
			return nil
		},
	}
}

func (a *app) nodeActivateCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "activate NODE",
		Short:   "Make a draining node take sandboxes again",
		Example: "  den node activate node-b",
		Args:    cli.Args("NODE"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			c, err := a.Client()
			if err != nil {
				return err
			}
			n, err := c.ActivateNode(cmd.Context(), argv[0])
			if err != nil {
				return err
			}
			if a.JSON {
				return cli.PrintJSON(a.Stdout, n)
			}
			fmt.Fprintf(a.Stdout, "node %s is %s\n", n.Name, n.State)
			return nil
		},
	}
}

func (a *app) nodeRmCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "rm NODE",
		Aliases: []string{"remove"},
		Short:   "Forget a lost node that no sandbox is on",
		Example: "  den node rm node-c",
		Args:    cli.Args("NODE"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			c, err := a.Client()
			if err != nil {
				return err
			}
			if err := c.RemoveNode(cmd.Context(), argv[0]); err != nil {
				return err
			}
			if a.JSON {
				return cli.PrintJSON(a.Stdout, map[string]string{"removed": argv[0]})
			}
			fmt.Fprintf(a.Stdout, "node %s removed\n", argv[0])
			return nil
		},
	}
}

func (a *app) moveCommand() *cobra.Command {
	var to string
	var cold bool
	cmd := &cobra.Command{
		Use:   "move NAME --to NODE [--cold]",
		Short: "Move a sandbox to another node of the fleet",
		Long: `The sandbox's node hibernates it (if it runs or is paused), uploads that
checkpoint to the blob store and hands it over to NODE, which downloads it and
wakes it there with its processes. --cold boots its files alone, losing its
processes: for a node with another runsc or CPU. It needs a fleet (dends on
one PostgreSQL) with a blob store (dend --blobs); if the hand-over fails the
sandbox stays hibernated where it was.`,
		Example: "  den move web --to node-b\n  den move web --to node-c --cold",
		Args:    cli.Args("NAME"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			if to == "" {
				return cli.Usagef("name the node: `den move NAME --to NODE` (`den node ls` lists them)", "--to is required")
			}
			c, err := a.Client()
			if err != nil {
				return err
			}
			sb, err := c.MoveSandbox(cmd.Context(), argv[0], to, cold)
			if err != nil {
				return err
			}
			if a.JSON {
				return cli.PrintJSON(a.Stdout, sb)
			}
			fmt.Fprintf(a.Stdout, "%s is %s on node %s\n", sb.Name, sb.State, sb.Node)
			return nil
		},
	}
	cmd.Flags().StringVar(&to, "to", "", "the node it goes to")
	cmd.Flags().BoolVar(&cold, "cold", false, "keep its files only, not its processes")
	return cmd
}
