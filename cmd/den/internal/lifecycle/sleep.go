package lifecycle

import (
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/docker/go-units"
	"github.com/spf13/cobra"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
	"github.com/den-dev/den/cmd/den/internal/cli"
)

func (a *app) pauseCommand() *cobra.Command {
	cmd := a.stateCommand("pause", "Freeze running sandboxes in RAM", (*client.Client).Pause)
	cmd.Long = `Freeze running sandboxes in RAM: their processes stop using CPU and keep their
memory, open files and connections. ` + "`den resume`" + ` thaws them in milliseconds.`
	cmd.Example = "  den pause web\n  den pause web worker-1 worker-2"
	return cmd
}

func (a *app) resumeCommand() *cobra.Command {
	cmd := a.stateCommand("resume", "Bring paused or hibernated sandboxes back to running", (*client.Client).Resume)
	cmd.Long = `Bring paused or hibernated sandboxes back to running, their processes
continuing where they were. Any call that needs a sandbox running (exec, cp,
...) also wakes it, so resuming by hand is rarely needed.`
	cmd.Example = "  den resume web"
	return cmd
}

func (a *app) hibernateCommand() *cobra.Command {
	cmd := a.stateCommand("hibernate", "Save sandboxes to disk and free their RAM", (*client.Client).Hibernate)
	cmd.Long = `Save running or paused sandboxes to disk, memory and processes included, and
free their RAM: a hibernated sandbox holds no process. ` + "`den resume`" + ` (or any call
that needs it running) restores it where it was.`
	cmd.Example = "  den hibernate web\n  den hibernate $(den ls --json | jq -r '.[] | select(.state==\"paused\") | .name')"
	return cmd
}

// policyFlags are the idle-policy flags `den create` and `den policy`
// share. Only the flags given on the command line are sent.
type policyFlags struct {
	pauseAfter, hibernateAfter, stopAfter, ttl, maxAge time.Duration
	background, wakeOnBoot                             bool
	keep                                               int
}

func (p *policyFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.DurationVar(&p.pauseAfter, "pause-after", 0, "pause it in RAM after this long idle, e.g. 5m; 0 never")
	f.DurationVar(&p.hibernateAfter, "hibernate-after", 0, "hibernate it to disk after this long idle, e.g. 1h; 0 never")
	f.DurationVar(&p.stopAfter, "stop-after", 0, "stop it (processes end, files stay) after this long idle, e.g. 30m; 0 never")
	f.DurationVar(&p.ttl, "ttl", 0, "destroy it after this much running time (paused and hibernated time does not count); 0 never")
	f.BoolVar(&p.background, "background-active", false, "count processes still running in it as activity, not only calls to it")
	f.BoolVar(&p.wakeOnBoot, "wake-on-boot", false, "wake it as soon as dend is back when a host shutdown hibernated it, not on its next use")
	f.IntVar(&p.keep, "keep", 0, "keep only the newest N manual checkpoints; 0 keeps all")
	f.DurationVar(&p.maxAge, "max-age", 0, "delete manual checkpoints older than this, e.g. 168h; 0 keeps them")
}

// changed returns the policy the flags given on cmd's command line say,
// or nil if none was given.
func (p *policyFlags) changed(cmd *cobra.Command) *api.Policy {
	var out api.Policy
	set := false
	dur := func(flag string, d time.Duration, field **string) {
		if cmd.Flags().Changed(flag) {
			*field, set = new(api.FormatDuration(d)), true
		}
	}
	dur("pause-after", p.pauseAfter, &out.PauseAfter)
	dur("hibernate-after", p.hibernateAfter, &out.HibernateAfter)
	dur("stop-after", p.stopAfter, &out.StopAfter)
	dur("ttl", p.ttl, &out.TTL)
	dur("max-age", p.maxAge, &out.MaxAge)
	if cmd.Flags().Changed("background-active") {
		out.BackgroundActive, set = new(p.background), true
	}
	if cmd.Flags().Changed("wake-on-boot") {
		out.WakeOnBoot, set = new(p.wakeOnBoot), true
	}
	if cmd.Flags().Changed("keep") {
		out.KeepLast, set = new(p.keep), true
	}
	if !set {
		return nil
	}
	return &out
}

func (a *app) policyCommand() *cobra.Command {
	var flags policyFlags
	cmd := &cobra.Command{
		Use:   "policy NAME",
		Short: "Show or change a sandbox's idle policy",
		Long: `Show or change when an idle sandbox is paused, hibernated or destroyed, and
how many checkpoints it keeps. Only the flags given change; the others keep
their value. Without flags, show the policy in effect (dend's defaults filled
in) and what it does next. A duration of 0 turns a step off.

A sandbox is idle when nothing calls it: no exec, attached command, file
transfer or other API call. With --background-active, processes still running
in it also count as activity.

When the host shuts down, dend hibernates its running and paused sandboxes
(see dend --on-stop). They wake on their next use, or as soon as dend is back
with --wake-on-boot.`,
		Example: `  den policy web
  den policy web --pause-after 5m --hibernate-after 1h
  den policy web --hibernate-after 0          # never hibernate
  den policy web --background-active=true
  den policy web --wake-on-boot               # back with the host after a reboot
  den policy web --keep 10 --max-age 168h`,
		Args: cli.Args("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.Client()
			if err != nil {
				return err
			}
			var sb *api.Sandbox
			if p := flags.changed(cmd); p != nil {
				sb, err = c.SetPolicy(cmd.Context(), args[0], *p)
			} else {
				sb, err = c.GetSandbox(cmd.Context(), args[0])
			}
			if err != nil {
				return err
			}
			if a.JSON {
				return cli.PrintJSON(a.Stdout, sb)
			}
			return renderPolicy(a.Stdout, sb, time.Now())
		},
	}
	flags.register(cmd)
	return cmd
}

// renderPolicy shows a sandbox's policy in effect, its running time and
// what its policy does next.
func renderPolicy(w io.Writer, sb *api.Sandbox, now time.Time) error {
	p := sb.Policy
	dur := func(s *string, zero string) string {
		if s == nil || *s == "0" || *s == "" {
			return zero
		}
		return *s
	}
	keep := "all"
	if p.KeepLast != nil && *p.KeepLast > 0 {
		keep = strconv.Itoa(*p.KeepLast)
	}
	yes := func(b *bool) string {
		if b != nil && *b {
			return "yes"
		}
		return "no"
	}
	next := "nothing"
	if sb.Next != nil {
		next = sb.Next.Action + " " + inTime(sb.Next.At, now)
	}
	t := cli.NewTable(w, "pause after", dur(p.PauseAfter, "never"))
	t.Row("hibernate after", dur(p.HibernateAfter, "never"))
	t.Row("stop after", dur(p.StopAfter, "never"))
	t.Row("ttl", dur(p.TTL, "none"))
	t.Row("background active", yes(p.BackgroundActive))
	t.Row("wake on boot", yes(p.WakeOnBoot))
	t.Row("keep last", keep)
	t.Row("max age", dur(p.MaxAge, "none"))
	t.Row("running for", dur(&sb.RunningFor, "0s"))
	t.Row("next", next)
	return t.Flush()
}

// inTime says how long after now t is: "in 5 minutes", or "now" once it
// has come.
func inTime(t, now time.Time) string {
	if !t.After(now) {
		return "now"
	}
	return "in " + strings.ToLower(units.HumanDuration(t.Sub(now)))
}

func (a *app) recoverCommand() *cobra.Command {
	var (
		retry, cold, rollback bool
		ckpt                  string
	)
	cmd := &cobra.Command{
		Use:   "recover NAME [--retry | --cold | --rollback [--checkpoint CKPT]]",
		Short: "Bring a sandbox in error back",
		Long: `Bring back a sandbox that went to error because its saved state could not be
restored (` + "`den inspect NAME`" + ` shows the reason). Choose one way:

  --retry     restore the same checkpoint again (the default)
  --cold      boot afresh from that checkpoint's files: the files are kept, the
              processes that were running are lost
  --rollback  restore an earlier checkpoint: --checkpoint CKPT, or the newest
              one before the one that failed`,
		Example: `  den recover web
  den recover web --cold
  den recover web --rollback --checkpoint before-upgrade`,
		Args: cli.Args("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts := client.RecoverOptions{Mode: api.RecoverRetry, Checkpoint: ckpt}
			n := 0
			for mode, on := range map[string]bool{api.RecoverRetry: retry, api.RecoverCold: cold, api.RecoverRollback: rollback} {
				if on {
					opts.Mode, n = mode, n+1
				}
			}
			if n > 1 {
				return cli.Usagef("give one of --retry, --cold or --rollback", "more than one way to recover given")
			}
			if ckpt != "" && opts.Mode != api.RecoverRollback {
				return cli.Usagef("--checkpoint goes with --rollback: `den recover NAME --rollback --checkpoint CKPT`", "--checkpoint without --rollback")
			}
			c, err := a.Client()
			if err != nil {
				return err
			}
			sb, err := c.Recover(cmd.Context(), args[0], opts)
			if err != nil {
				return err
			}
			if a.JSON {
				return cli.PrintJSON(a.Stdout, sb)
			}
			return cli.RenderSandboxes(a.Stdout, []api.Sandbox{*sb}, time.Now())
		},
	}
	f := cmd.Flags()
	f.BoolVar(&retry, "retry", false, "restore the same checkpoint again")
	f.BoolVar(&cold, "cold", false, "boot afresh from the checkpoint's files, losing its processes")
	f.BoolVar(&rollback, "rollback", false, "restore an earlier checkpoint")
	f.StringVar(&ckpt, "checkpoint", "", "with --rollback: the checkpoint to go back to (id or name)")
	return cmd
}
