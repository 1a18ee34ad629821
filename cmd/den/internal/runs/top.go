package runs

import (
	"context"
	"fmt"
	"io"
	"strconv"

	"github.com/docker/go-units"
	"github.com/spf13/cobra"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
	"github.com/den-dev/den/cmd/den/internal/cli"
)

func (a *app) topCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "top [NAME]",
		Short: "List the processes running in a sandbox, or what the host holds",
		Long: `List every process in a sandbox, those its commands left running in the
background included (den-init, its PID 1, aside). A paused or hibernated
sandbox is woken to answer. When dend's disk is down to its free-space
reserve, a warning on stderr says so: run output is being dropped and new
sandboxes and commands are refused until space is freed.

Without NAME, show what the answering node's host holds: its memory, and
the warm pools' instances and the memory they hold, per image.`,
		Example: `  den top web
  den top web --json | jq '.[].command'
  den top`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 {
				return cli.Usagef("usage: "+cmd.UseLine(), "unexpected argument %q", args[1])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.Client()
			if err != nil {
				return err
			}
			if len(args) == 0 {
				return a.hostTop(cmd.Context(), c)
			}
			procs, err := c.Processes(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if err := cli.PrintList(a.App, procs, func() error { return renderProcesses(a.Stdout, procs) }); err != nil {
				return err
			}
			if h, err := c.Health(cmd.Context()); err == nil {
				warnDiskLow(a.Stderr, h)
			}
			return nil
		},
	}
}

// hostTop prints the node's memory and its warm pools.
func (a *app) hostTop(ctx context.Context, c *client.Client) error {
	h, err := c.Health(ctx)
	if err != nil {
		return err
	}
	imgs, err := c.ListImages(ctx)
	if err != nil {
		return err
	}
	if a.JSON {
		pools := map[string]*api.WarmPool{}
		for _, im := range imgs {
			if im.Warm != nil {
				pools[im.Name] = im.Warm
			}
		}
		return cli.PrintJSON(a.Stdout, map[string]any{"warm": h.Warm, "pools": pools, "disk": h.Disk, "pool": h.Pool})
	}
	renderHost(a.Stdout, h, imgs)
	warnDiskLow(a.Stderr, h)
	return nil
}

// renderHost prints the host's memory and the warm pools' share of it.
func renderHost(w io.Writer, h *api.Health, imgs []api.Image) {
	size := func(n int64) string { return units.BytesSize(float64(n)) }
	wh := h.Warm
	if wh == nil {
		fmt.Fprintln(w, "warm pools: none shown (this dend keeps none, or shows the host's figures only to admins)")
		return
	}
	if wh.MemoryTotalBytes > 0 {
		state := "ok"
		if wh.Pressure {
			state = "LOW: warm pools are giving instances back"
		}
		fmt.Fprintf(w, "memory:     %s available of %s, %s kept free for sandboxes (%s)\n",
			size(wh.MemoryAvailableBytes), size(wh.MemoryTotalBytes), size(wh.ReserveBytes), state)
	}
	fmt.Fprintf(w, "warm pools: %d ready, %d booting, holding %s\n", wh.Instances, wh.Booting, size(wh.HostMemoryBytes))
	t := cli.NewTable(w, "IMAGE", "READY", "TARGET", "BOOTING", "SANDBOX MEMORY", "HOST MEMORY", "HELD")
	rows := 0
	for _, im := range imgs {
		p := im.Warm
		if p == nil {
			continue
		}
		held := p.Held
		if held == "" {
			held = "-"
		}
		t.Row(im.Name, strconv.Itoa(p.Ready), strconv.Itoa(p.Target), strconv.Itoa(p.Booting), size(p.MemoryBytes), size(p.HostMemoryBytes), held)
		rows++
	}
	if rows > 0 {
		t.Flush()
	}
}

// warnDiskLow says when dend's data disk is down to its reserve.
func warnDiskLow(w io.Writer, h *api.Health) {
	if h.Disk == nil || !h.Disk.Low {
		return
	}
	fmt.Fprintf(w, "warning: dend's disk is down to its free-space reserve (%s free, %s kept free): run output is being dropped and new sandboxes and commands are refused until space is freed\n",
		units.BytesSize(float64(h.Disk.FreeBytes)), units.BytesSize(float64(h.Disk.ReserveBytes)))
}

// renderProcesses prints the processes table; SECRETS marks those that
// may hold a secret (while one lives the sandbox's memory is not saved).
func renderProcesses(w io.Writer, procs []api.Process) error {
	t := cli.NewTable(w, "PID", "PPID", "STATE", "RSS", "SECRETS", "COMMAND")
	for _, p := range procs {
		cmd := p.Command
		if cmd == "" {
			cmd = "[" + p.Name + "]"
		}
		if len(cmd) > maxCommandWidth {
			cmd = cmd[:maxCommandWidth-3] + "..."
		}
		secrets := "-"
		if p.Secrets {
			secrets = "yes"
		}
		t.Row(strconv.Itoa(p.PID), strconv.Itoa(p.PPID), p.State, units.BytesSize(float64(p.RSSBytes)), secrets, cmd)
	}
	return t.Flush()
}
