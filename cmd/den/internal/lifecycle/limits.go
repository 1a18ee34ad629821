package lifecycle

import (
	"fmt"
	"io"

	"github.com/docker/go-units"
	"github.com/spf13/cobra"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/cmd/den/internal/cli"
)

func (a *app) limitsCommand() *cobra.Command {
	var (
		cpus        float64
		memory, dsk string
		pids        int
	)
	cmd := &cobra.Command{
		Use:   "limits NAME",
		Short: "Show or change a sandbox's resource limits",
		Long: `Show what a sandbox uses against its limits, or change them: only the flags
given change, at once on a running or paused sandbox. A process that goes past
the memory limit is killed (its run says limit_hit: memory), and a fork bomb
stops at the process limit, while the sandbox and the host carry on. A write
past the disk limit fails inside with "Disk quota exceeded" (btrfs pools only).
--pids 0 lifts the process limit; --disk 0 lifts the disk cap only where
dend has no default cap (--default-disk 0).`,
		Example: `  den limits web
  den limits web --memory 2G --cpus 2
  den limits web --pids 512 --disk 20G`,
		Args: cli.Args("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.Client()
			if err != nil {
				return err
			}
			var req api.LimitsRequest
			f := cmd.Flags()
			if f.Changed("cpus") {
				req.CPUs = &cpus
			}
			if f.Changed("memory") {
				req.Memory = &memory
			}
			if f.Changed("pids") {
				req.PIDs = &pids
			}
			if f.Changed("disk") {
				req.Disk = &dsk
			}
			if req != (api.LimitsRequest{}) {
				if _, err := c.SetLimits(cmd.Context(), args[0], req); err != nil {
					return err
				}
			}
			sb, err := c.GetSandbox(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if a.JSON {
				return cli.PrintJSON(a.Stdout, sb)
			}
			return renderLimits(a.Stdout, sb)
		},
	}
	f := cmd.Flags()
	f.Float64Var(&cpus, "cpus", 0, "CPUs, may be fractional")
	f.StringVar(&memory, "memory", "", "memory, e.g. 512M or 2G")
	f.IntVar(&pids, "pids", 0, "processes and threads at once (0: no limit)")
	f.StringVar(&dsk, "disk", "", "cap on its files, e.g. 10G")
	return cmd
}

// renderLimits shows usage against limits, as inspect does.
func renderLimits(w io.Writer, sb *api.Sandbox) error {
	var u api.Usage
	if sb.Usage != nil {
		u = *sb.Usage
	}
	limit := func(v int64, bytes bool) string {
		if v == 0 {
			return "no limit"
		}
		if bytes {
			return units.BytesSize(float64(v))
		}
		return fmt.Sprint(v)
	}
	t := cli.NewTable(w, "RESOURCE", "USED", "LIMIT")
	t.Row("cpu", fmt.Sprintf("%.1fs", u.CPUSeconds), fmt.Sprintf("%g CPUs", sb.CPUs))
	t.Row("memory", units.BytesSize(float64(u.MemoryBytes)), limit(sb.MemoryBytes, true))
	t.Row("processes", fmt.Sprint(u.PIDs), limit(int64(sb.PIDs), false))
	t.Row("disk", units.BytesSize(float64(u.DiskBytes)), limit(sb.DiskBytes, true))
	if u.RunOutputLimitBytes > 0 {
		t.Row("run output", units.BytesSize(float64(u.RunOutputBytes)), limit(u.RunOutputLimitBytes, true))
	}
	return t.Flush()
}
