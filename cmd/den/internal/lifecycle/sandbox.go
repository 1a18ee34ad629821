package lifecycle

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
	"github.com/den-dev/den/cmd/den/internal/access"
	"github.com/den-dev/den/cmd/den/internal/cli"
	"github.com/den-dev/den/cmd/den/internal/network"
)

func (a *app) createCommand() *cobra.Command {
	var (
		req                     api.CreateSandboxRequest
		env                     []string
		labels                  []string
		policy                  policyFlags
		net                     network.Flags
		envSecrets, fileSecrets []string
	)
	cmd := &cobra.Command{
		Use:   "create NAME",
		Short: "Create and start a sandbox",
		Long: `Create a sandbox and start it. Its files, installed packages and state persist
across stops, restarts of dend and reboots of the host, until it is removed.

With --from it starts from a checkpoint instead of an image: a checkpoint id, or
SANDBOX:NAME for a named checkpoint of a sandbox. It then gets that checkpoint's
files, image, CPUs and memory, and its processes if the checkpoint holds them.

When idle, a sandbox is paused, then hibernated, as dend's defaults or the
policy flags say (see ` + "`den policy --help`" + `). An --ephemeral sandbox keeps nothing
once destroyed, and is destroyed when its --ttl of running time ends.

A new sandbox reaches no network; --network and --allow say what it may reach
(see ` + "`den network --help`" + `).

--setup runs a shell command once it boots (repeat it for several, run in
order); a step that fails fails the create, leaving nothing. ` + "`den rebase`" + ` runs
the steps again on a new image version, keeping /root, /home, /work, /srv and
the paths given with --keep-path (see ` + "`den setup --help`" + `). --image IMAGE@VERSION
starts from an older version of an image.`,
		Example: `  den create web
  den create ml --image debian --cpus 2 --memory 4G --env API_URL=http://10.0.0.1 --label team=research
  den create copy --from web:before-upgrade
  den create scratch --ephemeral --ttl 30m --pause-after 1m --hibernate-after 5m
  den create agent --allow pypi.org:443 --allow '*.pythonhosted.org:443'
  den create dev --setup 'apt-get install -y git' --keep-path /opt/data`,
		Args: cli.Args("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			var err error
			req.Name = args[0]
			if req.Env, err = cli.ParseKeyValues("--env", env, a.Getenv); err != nil {
				return err
			}
			if req.Labels, err = cli.ParseKeyValues("--label", labels, nil); err != nil {
				return err
			}
			req.Policy = policy.changed(cmd)
			req.Network = net.Policy()
			req.Secrets = access.ParseGrants(envSecrets, fileSecrets)
			c, err := a.Client()
			if err != nil {
				return err
			}
			if req.From == "" {
				if err := a.buildOnFirstUse(cmd.Context(), c, req.Image); err != nil {
					return err
				}
			}
			sb, err := c.CreateSandbox(cmd.Context(), req)
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
	f.StringVar(&req.Image, "image", "", "image to start from, IMAGE or IMAGE@VERSION (default: dend's default, debian)")
	f.StringArrayVar(&req.Setup, "setup", nil, "a setup step: a shell command run once it boots, and by every rebase; repeatable")
	f.StringArrayVar(&req.Keep, "keep-path", nil, "an absolute path a rebase keeps besides /root, /home, /work and /srv; repeatable")
	f.Float64Var(&req.CPUs, "cpus", 0, "CPUs, may be fractional (default 1)")
	f.StringVar(&req.Memory, "memory", "", "memory limit, e.g. 512M or 2G (default 1G)")
	f.IntVar(&req.PIDs, "pids", 0, "processes and threads at once (default one per MiB of memory, 256 to 32768)")
	f.StringVar(&req.Disk, "disk", "", "cap on its files, e.g. 10G (btrfs pools; default: dend's --default-disk)")
	f.StringArrayVarP(&env, "env", "e", nil, "environment variable K=V for every command (K alone takes it from here); repeatable")
	f.StringArrayVar(&labels, "label", nil, "label K=V; repeatable")
	f.StringVar(&req.From, "from", "", "start from a checkpoint: its id, or SANDBOX:NAME")
	f.StringVar(&req.Node, "node", "", "in a fleet, the node it goes to (default: the one that commits the least of its memory)")
	net.Register(cmd, "network")
	f.StringArrayVar(&envSecrets, "secret", nil, "give its commands secret NAME as $NAME, or NAME=VAR as $VAR (admin); repeatable")
	f.StringArrayVar(&fileSecrets, "secret-file", nil, "give its commands secret NAME as /run/secrets/NAME, or NAME=FILE (admin); repeatable")
	f.BoolVar(&req.Ephemeral, "ephemeral", false, "keep nothing once destroyed; destroyed when its --ttl (default: dend's --ephemeral-ttl) of running time ends")
	policy.register(cmd)
	return cmd
}

// builtinImages are the images dend builds itself on first use.
var builtinImages = map[string]bool{"debian": true, "busybox": true}

// buildOnFirstUse builds a built-in image that is not there yet, showing
// its progress, so that `den create` does not sit silent for a minute
// while dend builds it.
func (a *app) buildOnFirstUse(ctx context.Context, c *client.Client, image string) error {
	if image == "" {
		image = "debian" // dend's default
	}
	if _, err := c.GetImage(ctx, image); !client.IsNotFound(err) || !builtinImages[image] {
		return nil // present, or not ours to build: create reports any problem
	}
	fmt.Fprintf(a.Stderr, "building image %s on first use (debian takes about a minute)\n", image)
	progress, done := a.ImageProgress()
	_, err := c.BuildImage(ctx, api.BuildImageRequest{Name: image}, progress)
	done()
	return err
}

func (a *app) lsCommand() *cobra.Command {
	var outdated bool
	cmd := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list", "ps"},
		Short:   "List sandboxes",
		Long: `List sandboxes. When a newer version of a sandbox's image exists, an OUTDATED
column says which version it runs and which is the newest; --outdated lists
only those (` + "`den rebase`" + ` moves them).`,
		Example: `  den ls
  den ls --outdated
  den ls --json | jq -r '.[].name'`,
		Args: cli.Args(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.Client()
			if err != nil {
				return err
			}
			sbs, err := c.ListSandboxes(cmd.Context())
			if err != nil {
				return err
			}
			if outdated {
				sbs = slices.DeleteFunc(sbs, func(sb api.Sandbox) bool { return !sb.ImageOutdated })
			}
			return cli.PrintList(a.App, sbs, func() error { return cli.RenderSandboxes(a.Stdout, sbs, time.Now()) })
		},
	}
	cmd.Flags().BoolVar(&outdated, "outdated", false, "only sandboxes whose image has a newer version")
	return cmd
}

// inspectOutput is a sandbox with its history.
type inspectOutput struct {
	api.Sandbox
	History []api.Event `json:"history"`
}

func (a *app) inspectCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "inspect NAME",
		Short: "Show a sandbox and its history as JSON",
		Example: `  den inspect web
  den inspect web | jq .state`,
		Args: cli.Args("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.Client()
			if err != nil {
				return err
			}
			sb, err := c.GetSandbox(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			events, err := c.Events(cmd.Context(), args[0])
			if err != nil {
				return fmt.Errorf("reading the history of %q: %w", args[0], err)
			}
			if events == nil {
				events = []api.Event{}
			}
			return cli.PrintJSON(a.Stdout, inspectOutput{Sandbox: *sb, History: events})
		},
	}
}

func (a *app) startCommand() *cobra.Command {
	cmd := a.stateCommand("start", "Start a stopped sandbox (a new generation, same files)", (*client.Client).StartSandbox)
	cmd.Example = "  den start web"
	return cmd
}

func (a *app) stopCommand() *cobra.Command {
	cmd := a.stateCommand("stop", "Stop a sandbox, keeping its files", (*client.Client).StopSandbox)
	cmd.Example = "  den stop web"
	return cmd
}

// stateCommand makes the verbs that move sandboxes to another state
// (start, stop, pause, ...), which differ only in the call. It prints the
// name of each sandbox moved, or with --json the sandboxes.
func (a *app) stateCommand(verb, short string, call func(*client.Client, context.Context, string) (*api.Sandbox, error)) *cobra.Command {
	return &cobra.Command{
		Use:   verb + " NAME...",
		Short: short,
		Args:  cli.AtLeast("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.Client()
			if err != nil {
				return err
			}
			var sbs []api.Sandbox
			err = a.Each(args, func(name string) error {
				sb, err := call(c, cmd.Context(), name)
				if err != nil {
					return err
				}
				sbs = append(sbs, *sb)
				if !a.JSON {
					fmt.Fprintln(a.Stdout, sb.Name)
				}
				return nil
			})
			if a.JSON && sbs != nil {
				if jerr := cli.PrintJSON(a.Stdout, sbs); jerr != nil {
					return jerr
				}
			}
			return err
		},
	}
}

func (a *app) rmCommand() *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:     "rm NAME...",
		Aliases: []string{"remove"},
		Short:   "Remove sandboxes and their files",
		Long:    "Remove sandboxes for good: their files and history are deleted. A running sandbox needs -f.",
		Example: `  den rm web
  den rm -f web worker-1 worker-2`,
		Args: cli.AtLeast("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.Client()
			if err != nil {
				return err
			}
			return a.EachDone(args, func(name string) error {
				return c.RemoveSandbox(cmd.Context(), name, force)
			})
		},
	}
	cmd.Flags().BoolVarP(&force, "force", "f", false, "stop the sandbox first if it is running")
	return cmd
}
