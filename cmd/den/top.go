package main

import (
	"fmt"
	"io"
	"strconv"

	"github.com/docker/go-units"
	"github.com/spf13/cobra"

	"github.com/den-dev/den/api"
)

func (a *app) topCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "top NAME",
		Short: "List the processes running in a sandbox",
		Long: `List every process in a sandbox, those its commands left running in the
background included (den-init, its PID 1, aside). A paused or hibernated
sandbox is woken to answer. When dend's disk is down to its free-space
reserve, a warning on stderr says so: run output is being dropped and new
sandboxes and commands are refused until space is freed.`,
		Example: `  den top web
  den top web --json | jq '.[].command'`,
		Args: args("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			procs, err := c.Processes(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if err := printList(a, procs, func() error { return renderProcesses(a.stdout, procs) }); err != nil {
				return err
			}
			if h, err := c.Health(cmd.Context()); err == nil {
				warnDiskLow(a.stderr, h)
			}
			return nil
		},
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
	t := newTable(w, "PID", "PPID", "STATE", "RSS", "SECRETS", "COMMAND")
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
		t.row(strconv.Itoa(p.PID), strconv.Itoa(p.PPID), p.State, units.BytesSize(float64(p.RSSBytes)), secrets, cmd)
	}
	return t.flush()
}
