package checkpoints

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
	"github.com/den-dev/den/cmd/den/internal/cli"
)

func (a *app) rebaseCommand() *cobra.Command {
	var (
		image string
		all   bool
	)
	cmd := &cobra.Command{
		Use:   "rebase [NAME]",
		Short: "Move a sandbox onto a new image version, keeping its own files",
		Long: `Give a sandbox a new root filesystem from an image version while keeping what
is its own. den takes a files-only checkpoint, makes a new root from the image
(--image IMAGE or IMAGE@VERSION; default: the newest version of the sandbox's
own image), copies the kept paths over from the checkpoint (/root, /home, /work
and /srv, plus any set with ` + "`den setup --keep-path`" + `), boots it as the next generation and runs
its setup steps again (see ` + "`den setup --help`" + `). Its processes end.

If a setup step fails, or anything else does, the sandbox is booted back from
the checkpoint and den says which step failed, its exit code and the end of
its output. ` + "`den restore NAME CHECKPOINT`" + ` undoes a rebase that worked.

With --all, every sandbox made from --image that is not on the target version
is rebased, one at a time, stopping at the first failure. ` + "`den ls --outdated`" + `
lists the sandboxes a newer image version exists for.`,
		Example: `  den rebase web
  den rebase web --image debian@3
  den image build debian --force && den rebase --all --image debian`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case all && len(args) > 0:
				return cli.Usagef("name a sandbox, or use --all --image IMAGE", "--all takes no sandbox name")
			case all && image == "":
				return cli.Usagef("e.g. den rebase --all --image debian", "--all needs --image")
			case !all && len(args) == 0:
				return cli.Usagef("usage: "+cmd.UseLine(), "missing NAME")
			}
			c, err := a.Client()
			if err != nil {
				return err
			}
			if all {
				return a.rebaseAll(cmd, c, image)
			}
			res, err := c.Rebase(cmd.Context(), args[0], image)
			if err != nil {
				return err
			}
			if a.JSON {
				return cli.PrintJSON(a.Stdout, res)
			}
			renderRebase(a.Stdout, res)
			return nil
		},
	}
	cmd.Flags().StringVar(&image, "image", "", "image to rebase onto, IMAGE or IMAGE@VERSION (default: the newest version of its own)")
	cmd.Flags().BoolVar(&all, "all", false, "rebase every sandbox made from --image onto its target version, one at a time")
	return cmd
}

// rebaseAll rebases, one at a time, every sandbox the caller sees that was
// made from image and is not on its target version, stopping at the first
// failure.
func (a *app) rebaseAll(cmd *cobra.Command, c *client.Client, image string) error {
	ctx := cmd.Context()
	name, version, _ := strings.Cut(image, "@")
	im, err := c.GetImage(ctx, name)
	if err != nil {
		return err
	}
	target := fmt.Sprint(im.Version)
	if version != "" {
		target = version
	}
	sbs, err := c.ListSandboxes(ctx)
	if err != nil {
		return err
	}
	var todo []api.Sandbox
	for _, sb := range sbs {
		if sb.Image == name && fmt.Sprint(sb.ImageVersion) != target && sb.State != "error" && sb.State != "creating" {
			todo = append(todo, sb)
		}
	}
	done := []*api.Rebase{}
	if len(todo) == 0 && !a.JSON {
		fmt.Fprintf(a.Stdout, "no sandbox made from %s needs rebasing onto %s@%s\n", name, name, target)
	}
	for i, sb := range todo {
		res, err := c.Rebase(ctx, sb.Name, name+"@"+target)
		if err != nil {
			if a.JSON {
				cli.PrintJSON(a.Stdout, done)
			}
			return fmt.Errorf("rebased %d of %d sandboxes; stopped at %s: %w", i, len(todo), sb.Name, err)
		}
		done = append(done, res)
		if !a.JSON {
			renderRebase(a.Stdout, res)
		}
	}
	if a.JSON {
		return cli.PrintJSON(a.Stdout, done)
	}
	return nil
}

// renderRebase says what a rebase did, in a few lines.
func renderRebase(w io.Writer, r *api.Rebase) {
	fmt.Fprintf(w, "%s: %s -> %s, generation %d, in %s\n", r.Sandbox.Name, r.From, r.To, r.Sandbox.Generation,
		(time.Duration(r.DurationMS) * time.Millisecond).String())
	kept := "nothing"
	if len(r.Kept) > 0 {
		kept = strings.Join(r.Kept, " ")
	}
	harness := 0
	for _, st := range r.Steps {
		if st.Harness {
			harness++
		}
	}
	ran := fmt.Sprintf("%d setup steps", len(r.Steps)-harness)
	if harness > 0 {
		ran += fmt.Sprintf(" and %d harness steps", harness)
	}
	fmt.Fprintf(w, "  kept %s; %s ran; undo with `den restore %s %s`\n", kept, ran, r.Sandbox.Name, r.Checkpoint)
}

func (a *app) setupCommand() *cobra.Command {
	var (
		steps, keep           []string
		clearSteps, clearKeep bool
	)
	cmd := &cobra.Command{
		Use:   "setup NAME",
		Short: "Show or change a sandbox's setup steps and kept paths",
		Long: `A sandbox's setup steps are shell commands that make it what it is on top of
its image: they run once when it is created (` + "`den create --setup`" + `) and again, in
order, each time ` + "`den rebase`" + ` gives it a new root. Its kept paths are what a
rebase carries over from the old root: /root, /home, /work and /srv always,
plus the absolute paths given with --keep-path.

Without flags, prints them. --step replaces the steps (repeat it for several),
--keep-path the extra kept paths; --clear-steps and --clear-keep empty them.
Nothing runs now.`,
		Example: `  den setup web
  den setup web --step 'apt-get update' --step 'apt-get install -y git'
  den setup web --keep-path /opt/data --keep-path /var/lib/app
  den setup web --clear-steps`,
		Args: cli.Args("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if clearSteps && len(steps) > 0 || clearKeep && len(keep) > 0 {
				return cli.Usagef("give either new values or --clear-...", "--clear-steps and --step (or --clear-keep and --keep-path) contradict each other")
			}
			c, err := a.Client()
			if err != nil {
				return err
			}
			// Cleared is an empty list, never null, which would mean unchanged.
			steps, keep = append([]string{}, steps...), append([]string{}, keep...)
			var req api.SetupRequest
			if len(steps) > 0 || clearSteps {
				req.Steps = &steps
			}
			if len(keep) > 0 || clearKeep {
				req.Keep = &keep
			}
			var sb *api.Sandbox
			if req.Steps == nil && req.Keep == nil {
				sb, err = c.GetSandbox(cmd.Context(), args[0])
			} else {
				sb, err = c.SetSetup(cmd.Context(), args[0], req)
			}
			if err != nil {
				return err
			}
			if a.JSON {
				return cli.PrintJSON(a.Stdout, sb)
			}
			fmt.Fprintf(a.Stdout, "image: %s@%d\n", sb.Image, sb.ImageVersion)
			fmt.Fprintf(a.Stdout, "kept paths: %s\n", strings.Join(sb.Keep, " "))
			if len(sb.Setup) == 0 {
				fmt.Fprintln(a.Stdout, "setup steps: none")
			}
			for i, st := range sb.Setup {
				// One line each: a step's newlines and escapes shown as \n, \x1b.
				fmt.Fprintf(a.Stdout, "step %d: %s\n", i+1, cli.EscapeControl(st))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&steps, "step", nil, "a setup step, a shell command; repeatable, replaces the steps")
	f.StringArrayVar(&keep, "keep-path", nil, "an absolute path a rebase keeps besides the defaults; repeatable, replaces the extra ones")
	f.BoolVar(&clearSteps, "clear-steps", false, "remove every setup step")
	f.BoolVar(&clearKeep, "clear-keep", false, "keep only the default paths")
	return cmd
}
