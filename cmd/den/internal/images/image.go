package images

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/docker/go-units"
	"github.com/spf13/cobra"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
	"github.com/den-dev/den/cmd/den/internal/cli"
)

func (a *app) imageCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "image COMMAND",
		Short: "Manage the images sandboxes start from",
		Long: `Manage images: base root filesystems sandboxes are created from. Build one of
the built-in images (debian, busybox, e2b-base), import a docker save or OCI archive,
or pull from a registry.`,
		Example: `  den image ls
  den image build debian
  den image import myapp ./myapp.tar
  den image pull 127.0.0.1:5000/tools:1 --name tools --insecure
  den image rm tools
  den image warm busybox 4`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return cli.Usagef("see `den image --help`", "unknown image command %q", args[0])
			}
			return cli.Usagef("see `den image --help`", "missing the image command (ls, inspect, build, import, pull, rm, warm)")
		},
		RunE: func(*cobra.Command, []string) error { return nil },
	}
	cmd.AddCommand(a.imageLsCommand(), a.imageInspectCommand(), a.imageBuildCommand(),
		a.imageImportCommand(), a.imagePullCommand(), a.imageRmCommand(), a.imageWarmCommand())
	return cmd
}

func (a *app) imageLsCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List images",
		Example: "  den image ls\n  den image ls --json",
		Args:    cli.Args(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.Client()
			if err != nil {
				return err
			}
			imgs, err := c.ListImages(cmd.Context())
			if err != nil {
				return err
			}
			return cli.PrintList(a.App, imgs, func() error { return renderImages(a.Stdout, imgs, time.Now()) })
		},
	}
}

func (a *app) imageInspectCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "inspect NAME",
		Short:   "Show an image as JSON",
		Example: "  den image inspect debian",
		Args:    cli.Args("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.Client()
			if err != nil {
				return err
			}
			img, err := c.GetImage(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return cli.PrintJSON(a.Stdout, img)
		},
	}
}

func (a *app) imageBuildCommand() *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "build NAME",
		Short: "Build a built-in image: debian, busybox or e2b-base",
		Example: `  den image build debian
  den image build busybox --force`,
		Args: cli.Args("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.imageJob(cmd.Context(), func(c *client.Client, progress func(api.Progress)) (*api.Image, error) {
				return c.BuildImage(cmd.Context(), api.BuildImageRequest{Name: args[0], Force: force}, progress)
			})
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "rebuild even if the image exists, from scratch (not copied from dend's image cache)")
	return cmd
}

func (a *app) imageImportCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "import NAME FILE",
		Short: "Import a docker save or OCI layout tarball as an image",
		Long:  "Import a tarball made by `docker save` or `podman save` (or an OCI layout archive) as image NAME. FILE - reads it from stdin.",
		Example: `  den image import myapp ./myapp.tar
  podman save myapp:latest | den image import myapp -`,
		Args: cli.Args("NAME", "FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			var r io.Reader = a.Stdin
			if args[1] != "-" {
				f, err := os.Open(args[1])
				if err != nil {
					return fmt.Errorf("importing image %s: %w", args[0], err)
				}
				defer f.Close()
				r = f
			}
			return a.imageJob(cmd.Context(), func(c *client.Client, progress func(api.Progress)) (*api.Image, error) {
				return c.ImportImage(cmd.Context(), args[0], r, progress)
			})
		},
	}
}

func (a *app) imagePullCommand() *cobra.Command {
	var req api.PullImageRequest
	cmd := &cobra.Command{
		Use:   "pull REF",
		Short: "Pull an image from a registry",
		Example: `  den image pull 127.0.0.1:5000/tools:1 --name tools --insecure
  den image pull docker.io/library/python:3.12-slim --name python`,
		Args: cli.Args("REF"),
		RunE: func(cmd *cobra.Command, args []string) error {
			req.Ref = args[0]
			return a.imageJob(cmd.Context(), func(c *client.Client, progress func(api.Progress)) (*api.Image, error) {
				return c.PullImage(cmd.Context(), req, progress)
			})
		},
	}
	cmd.Flags().StringVar(&req.Name, "name", "", "name of the image in den (default: derived from REF)")
	cmd.Flags().BoolVar(&req.Insecure, "insecure", false, "talk plain HTTP to the registry")
	return cmd
}

// imageJob runs a build, import or pull with progress on stderr and prints
// the image it made.
func (a *app) imageJob(ctx context.Context, job func(*client.Client, func(api.Progress)) (*api.Image, error)) error {
	c, err := a.Client()
	if err != nil {
		return err
	}
	progress, done := a.ImageProgress()
	img, err := job(c, progress)
	done()
	if err != nil {
		return err
	}
	if a.JSON {
		return cli.PrintJSON(a.Stdout, img)
	}
	return renderImages(a.Stdout, []api.Image{*img}, time.Now())
}

func (a *app) imageRmCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "rm NAME...",
		Aliases: []string{"remove"},
		Short:   "Remove images",
		Example: "  den image rm tools",
		Args:    cli.AtLeast("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.Client()
			if err != nil {
				return err
			}
			return a.EachDone(args, func(name string) error {
				return c.RemoveImage(cmd.Context(), name)
			})
		},
	}
}

func (a *app) imageWarmCommand() *cobra.Command {
	var memory string
	cmd := &cobra.Command{
		Use:   "warm IMAGE N",
		Short: "Keep N instances of an image booted ahead of demand",
		Long: `Keep N instances of IMAGE booted ahead of demand on the node that answers: each
has its root filesystem made, its engine up, den-init answering and its network
attached with no egress. A create from IMAGE with the pool's memory size claims
one instead of booting (it becomes the new sandbox, with its own id, name, host
name, token, limits, network policy, env, labels and secrets) and the pool
refills in the background. Creates with another memory size, with --from, or
from another image boot as usual. Each warm instance holds host memory (about
60 MiB for busybox; see the WARM MEMORY column of ` + "`den image ls`" + `), and pools give
instances back when the host runs low. N 0 empties the pool. Each node of a
fleet keeps its own pools. Admins only.`,
		Example: `  den image warm busybox 4
  den image warm debian 2 --memory 512M
  den image warm busybox 0`,
		Args: cli.Args("IMAGE", "N"),
		RunE: func(cmd *cobra.Command, args []string) error {
			n, err := strconv.Atoi(args[1])
			if err != nil {
				return cli.Usagef("give the number of instances to keep, e.g. `den image warm busybox 4`", "invalid count %q: not a whole number", args[1])
			}
			req := api.SetWarmRequest{Count: n}
			if memory != "" {
				if req.MemoryBytes, err = units.RAMInBytes(memory); err != nil {
					return cli.Usagef("use a size like 512M or 2G", "invalid --memory %q", memory)
				}
			}
			c, err := a.Client()
			if err != nil {
				return err
			}
			p, err := c.SetWarm(cmd.Context(), args[0], req)
			if err != nil {
				return err
			}
			if a.JSON {
				return cli.PrintJSON(a.Stdout, p)
			}
			fmt.Fprintf(a.Stdout, "%s: %d warm instances for sandboxes of %s memory (%d ready, %d booting)\n",
				args[0], p.Target, units.BytesSize(float64(p.MemoryBytes)), p.Ready, p.Booting)
			return nil
		},
	}
	cmd.Flags().StringVar(&memory, "memory", "", "memory limit of the sandboxes the pool serves (default 1G, a create's default)")
	// "-3" would otherwise read as an unknown flag.
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		if strings.Contains(err.Error(), "unknown shorthand flag") && strings.ContainsAny(err.Error(), "0123456789") {
			return cli.Usagef("give a count from 0 (no pool) to 64", "invalid count: it cannot be negative")
		}
		return err
	})
	return cmd
}

func renderImages(w io.Writer, imgs []api.Image, now time.Time) error {
	t := cli.NewTable(w, "NAME", "VERSION", "SOURCE", "REF", "SIZE", "CREATED", "WARM", "WARM MEMORY")
	for _, i := range imgs {
		warm, warmMem := "-", "-"
		if p := i.Warm; p != nil && (p.Target > 0 || p.Ready > 0) {
			warm = fmt.Sprintf("%d/%d", p.Ready, p.Target)
			if p.Held != "" {
				warm += " (held)"
			}
			warmMem = units.BytesSize(float64(p.HostMemoryBytes))
		}
		t.Row(i.Name, strconv.Itoa(max(i.Version, 1)), i.Source, cmp.Or(i.Ref, "-"), units.HumanSize(float64(i.SizeBytes)), cli.Ago(i.CreatedAt, now), warm, warmMem)
		// Its older versions follow it, newest first.
		for _, o := range slices.Backward(i.Older) {
			t.Row(o.Name, fmt.Sprintf("%d (older)", o.Version), o.Source, cmp.Or(o.Ref, "-"), units.HumanSize(float64(o.SizeBytes)), cli.Ago(o.CreatedAt, now), "-", "-")
		}
	}
	return t.Flush()
}
