package checkpoints

import (
	"cmp"
	"io"
	"strings"
	"time"

	"github.com/docker/go-units"
	"github.com/spf13/cobra"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
	"github.com/den-dev/den/cmd/den/internal/cli"
)

func (a *app) checkpointCommand() *cobra.Command {
	var opts client.CheckpointOptions
	cmd := &cobra.Command{
		Use:   "checkpoint NAME",
		Short: "Take a checkpoint of a sandbox",
		Long: `Take a checkpoint of a sandbox: a read-only snapshot of its files and, unless
--fs-only, of its memory and processes, at one instant. The sandbox goes on
running. Go back to it with ` + "`den restore`" + `, branch from it with ` + "`den fork`" + ` or
` + "`den create --from`" + `, list them with ` + "`den checkpoints`" + `.

A files-only checkpoint is quicker and smaller; restoring it boots the
sandbox afresh on those files.`,
		Example: `  den checkpoint web
  den checkpoint web --name before-upgrade
  den checkpoint web --fs-only
  den checkpoint rm web before-upgrade`,
		Args: cli.Args("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.Client()
			if err != nil {
				return err
			}
			ck, err := c.Checkpoint(cmd.Context(), args[0], opts)
			if err != nil {
				return err
			}
			if a.JSON {
				return cli.PrintJSON(a.Stdout, ck)
			}
			return renderCheckpoints(a.Stdout, []api.Checkpoint{*ck}, time.Now())
		},
	}
	cmd.Flags().StringVar(&opts.Name, "name", "", "a label to refer to it by, unique within the sandbox")
	cmd.Flags().BoolVar(&opts.FSOnly, "fs-only", false, "files only: no memory or processes")
	cmd.AddCommand(a.checkpointRmCommand())
	return cmd
}

func (a *app) checkpointRmCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "rm NAME CKPT...",
		Aliases: []string{"remove"},
		Short:   "Remove checkpoints of a sandbox",
		Long: `Remove checkpoints of a sandbox, by id or name. A checkpoint a sandbox still
needs (see NEEDED BY in ` + "`den checkpoints`" + `) is refused. The children of a
removed checkpoint take its parent as theirs.`,
		Example: `  den checkpoint rm web before-upgrade
  den checkpoint rm web ck-01j9 ck-01ja`,
		Args: cli.AtLeast("NAME", "CKPT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.Client()
			if err != nil {
				return err
			}
			return a.EachDone(args[1:], func(ckpt string) error {
				return c.RemoveCheckpoint(cmd.Context(), args[0], ckpt)
			})
		},
	}
}

func (a *app) checkpointsCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "checkpoints NAME",
		Short: "List a sandbox's checkpoints as a tree",
		Long: `List a sandbox's checkpoints, each under the one it descends from. A restore
starts a new branch: the next checkpoint is a child of the restored one.

CONTENT is memory (memory, processes and files) or files-only; SIZE adds the
memory image and the files; WHERE is local (on this host only), uploading, or
uploaded (in dend's blob store too, so it survives the host: see dend
--blobs); NEEDED BY names the sandboxes that depend on it.
With --json, the flat list, oldest first, with parent links.`,
		Example: `  den checkpoints web
  den checkpoints web --json | jq -r '.[] | select(.memory) | .id'`,
		Args: cli.Args("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.Client()
			if err != nil {
				return err
			}
			cks, err := c.Checkpoints(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return cli.PrintList(a.App, cks, func() error { return renderCheckpoints(a.Stdout, cks, time.Now()) })
		},
	}
}

// renderCheckpoints writes checkpoints as a tree: each under its parent,
// siblings in the order given (oldest first). One whose parent is not in
// the list starts a tree of its own.
func renderCheckpoints(w io.Writer, cks []api.Checkpoint, now time.Time) error {
	index := make(map[string]int, len(cks))
	for i, c := range cks {
		index[c.ID] = i
	}
	children := map[string][]int{}
	var roots []int
	for i, c := range cks {
		if _, ok := index[c.Parent]; ok && c.Parent != c.ID {
			children[c.Parent] = append(children[c.Parent], i)
		} else {
			roots = append(roots, i)
		}
	}
	t := cli.NewTable(w, "ID", "NAME", "KIND", "CONTENT", "SIZE", "WHERE", "AGE", "NEEDED BY")
	seen := make([]bool, len(cks))
	var walk func(i int, branch, indent string)
	walk = func(i int, branch, indent string) {
		seen[i] = true
		c := cks[i]
		t.Row(branch+c.ID, orDash(c.Name), c.Kind, checkpointContent(c),
			units.BytesSize(float64(c.MemoryBytes+c.FilesBytes)), cmp.Or(c.Location, api.LocationLocal), cli.Ago(c.CreatedAt, now),
			orDash(strings.Join(c.NeededBy, ",")))
		kids := children[c.ID]
		for k, j := range kids {
			if seen[j] {
				continue
			}
			if k == len(kids)-1 {
				walk(j, indent+"└─ ", indent+"   ")
			} else {
				walk(j, indent+"├─ ", indent+"│  ")
			}
		}
	}
	for _, i := range roots {
		walk(i, "", "")
	}
	// Parent links that loop reach no root; show those checkpoints anyway.
	for i := range cks {
		if !seen[i] {
			walk(i, "", "")
		}
	}
	return t.Flush()
}

func checkpointContent(c api.Checkpoint) string {
	if c.Memory {
		return "memory"
	}
	return "files-only"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func (a *app) restoreCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "restore NAME CKPT",
		Short: "Rewind a sandbox to one of its checkpoints",
		Long: `Rewind a sandbox in place to one of its checkpoints (id or name): it gets the
checkpoint's files and, if the checkpoint holds them, its processes, as a new
generation. What it did since is lost unless you checkpoint it first.`,
		Example: `  den restore web before-upgrade
  den checkpoint web --name mistake && den restore web before-upgrade`,
		Args: cli.Args("NAME", "CKPT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.Client()
			if err != nil {
				return err
			}
			sb, err := c.Restore(cmd.Context(), args[0], args[1])
			if err != nil {
				return err
			}
			if a.JSON {
				return cli.PrintJSON(a.Stdout, sb)
			}
			return cli.RenderSandboxes(a.Stdout, []api.Sandbox{*sb}, time.Now())
		},
	}
}

func (a *app) forkCommand() *cobra.Command {
	var opts client.ForkOptions
	cmd := &cobra.Command{
		Use:   "fork NAME NEW",
		Short: "Make new sandboxes that start as copies of one",
		Long: `Make new sandboxes that start as copies of a sandbox: of it as it is now (it
is frozen for a moment while it is captured) or, with --from, of one of its
checkpoints. Each child has its own id, address and files from then on, and
its processes go on from where they were; open network connections are reset.
With --count N, the children are NEW-1 … NEW-N.`,
		Example: `  den fork web web-try
  den fork web try --from before-upgrade --count 4`,
		Args: cli.Args("NAME", "NEW"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("count") && opts.Count < 1 {
				return cli.Usagef("give --count 1 or more", "invalid --count %d", opts.Count)
			}
			c, err := a.Client()
			if err != nil {
				return err
			}
			opts.Name = args[1]
			kids, err := c.Fork(cmd.Context(), args[0], opts)
			if err != nil {
				return err
			}
			return cli.PrintList(a.App, kids, func() error { return cli.RenderSandboxes(a.Stdout, kids, time.Now()) })
		},
	}
	cmd.Flags().StringVar(&opts.From, "from", "", "fork from this checkpoint (id or name) instead of the live sandbox")
	cmd.Flags().IntVarP(&opts.Count, "count", "n", 1, "how many children to make")
	return cmd
}
