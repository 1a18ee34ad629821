package access

import (
	"fmt"
	"io"
	"strings"

	"github.com/docker/go-units"
	"github.com/spf13/cobra"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
	"github.com/den-dev/den/cmd/den/internal/cli"
)

func (a *app) ownerCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "owner COMMAND",
		Short: "Owners' quotas and private-range grants",
		Long: `An owner is the identity an owner token's sandboxes carry (a token made
--for another shares that one's). Each owner has a quota: how many sandboxes
it may have, and how much memory, CPUs and disk their limits may add up to,
and how many manual checkpoints it may keep (0: no limit). Owners an admin
set none for have dend's default (dend --owner-sandboxes and friends).

Name an owner by one of its tokens (name or id), by its identity, or as
"self" for the caller's own. An owner token may only show its own; setting is
for admins.`,
		Example: `  den owner ls
  den owner show agent
  den owner set agent --sandboxes 10 --memory 16G --cpus 8 --disk 100G --checkpoints 50
  den owner set agent --allow-private 10.20.0.0/16,192.168.7.0/24
  DEN_TOKEN=den_... den owner show self`,
		Args: cli.Subcommands("owner", "ls, show, set, reset"),
		RunE: func(*cobra.Command, []string) error { return nil },
	}
	cmd.AddCommand(a.ownerLsCommand(), a.ownerShowCommand(), a.ownerSetCommand(), a.ownerResetCommand())
	return cmd
}

func (a *app) ownerLsCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List owners with their use against their quotas (admin)",
		Example: "  den owner ls\n  den owner ls --json",
		Args:    cli.Args(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.Client()
			if err != nil {
				return err
			}
			list, err := c.ListOwners(cmd.Context())
			if err != nil {
				return err
			}
			return cli.PrintList(a.App, list, func() error { return renderOwners(a.Stdout, list) })
		},
	}
}

func renderOwners(w io.Writer, list []api.Owner) error {
	t := cli.NewTable(w, "OWNER", "TOKENS", "SANDBOXES", "MEMORY", "CPUS", "DISK", "CHECKPOINTS", "PRIVATE")
	for _, o := range list {
		c := quotaCells(o)
		tokens := strings.Join(o.Tokens, ",")
		if tokens == "" {
			tokens = "-"
		}
		private := strings.Join(o.AllowPrivate, ",")
		if private == "" {
			private = "-"
		}
		t.Row(append(append([]string{o.ID, tokens}, c...), private)...)
	}
	return t.Flush()
}

// quotaCells shows each resource's use against its limit: "2/5", or the
// use alone with "/-" where there is no limit.
func quotaCells(o api.Owner) []string {
	count := func(use, limit int) string { return fmt.Sprintf("%d/%s", use, limitOr(limit != 0, fmt.Sprint(limit))) }
	bytes := func(use, limit int64) string {
		return fmt.Sprintf("%s/%s", units.BytesSize(float64(use)), limitOr(limit != 0, units.BytesSize(float64(limit))))
	}
	return []string{
		count(o.Use.Sandboxes, o.Quota.Sandboxes),
		bytes(o.Use.MemoryBytes, o.Quota.MemoryBytes),
		fmt.Sprintf("%s/%s", cli.FormatCPUs(o.Use.CPUs), limitOr(o.Quota.CPUs != 0, cli.FormatCPUs(o.Quota.CPUs))),
		bytes(o.Use.DiskBytes, o.Quota.DiskBytes),
		count(o.Use.Checkpoints, o.Quota.Checkpoints),
	}
}

func limitOr(ok bool, v string) string {
	if ok {
		return v
	}
	return "-"
}

// ownerSummary is one owner's use against its quota on one line, for
// `den token ls`.
func ownerSummary(o api.Owner) string {
	c := quotaCells(o)
	s := fmt.Sprintf("sbx %s, mem %s, cpu %s", c[0], c[1], c[2])
	if o.Quota.DiskBytes != 0 || o.Use.DiskBytes != 0 {
		s += ", disk " + c[3]
	}
	return s + ", ckpt " + c[4]
}

func (a *app) ownerShowCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "show OWNER",
		Aliases: []string{"inspect"},
		Short:   "Show an owner's quota, use and grants",
		Long:    "Show an owner's quota, use and grants. OWNER is a token's name or id, an owner identity, or self.",
		Example: "  den owner show agent\n  den owner show self --json",
		Args:    cli.Args("OWNER"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.Client()
			if err != nil {
				return err
			}
			o, err := c.Owner(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if a.JSON {
				return cli.PrintJSON(a.Stdout, o)
			}
			return renderOwner(a.Stdout, o)
		},
	}
}

func renderOwner(w io.Writer, o *api.Owner) error {
	c := quotaCells(*o)
	from := "set by an admin"
	if o.Default {
		from = "dend's default"
	}
	fmt.Fprintf(w, "owner:        %s\n", o.ID)
	if len(o.Tokens) > 0 {
		fmt.Fprintf(w, "tokens:       %s\n", strings.Join(o.Tokens, ", "))
	}
	fmt.Fprintf(w, "quota:        %s (use/limit; - is no limit)\n", from)
	for i, name := range []string{"sandboxes", "memory", "cpus", "disk", "checkpoints"} {
		fmt.Fprintf(w, "  %-12s %s\n", name+":", c[i])
	}
	private := strings.Join(o.AllowPrivate, ", ")
	if private == "" {
		private = "none beyond dend --allow-private"
	}
	_, err := fmt.Fprintf(w, "private:      %s\n", private)
	return err
}

func (a *app) ownerSetCommand() *cobra.Command {
	var req api.SetOwnerRequest
	var sandboxes, checkpoints int
	var cpus float64
	var memory, disk string
	var private []string
	cmd := &cobra.Command{
		Use:   "set OWNER [flags]",
		Short: "Set an owner's quota or private-range grants (admin)",
		Long: `Set an owner's quota or the private ranges its network rules may name. Flags
not given keep their value; 0 sets no limit. A quota lowered below what the
owner uses takes nothing away: it is refused more until it is back under.
--allow-private replaces the owner's grants (--allow-private '' removes them);
a grant a sandbox's rules still need cannot be taken away.`,
		Example: `  den owner set agent --sandboxes 10 --memory 16G --cpus 8
  den owner set agent --disk 100G --checkpoints 50
  den owner set agent --allow-private 10.20.0.0/16`,
		Args: cli.Args("OWNER"),
		RunE: func(cmd *cobra.Command, args []string) error {
			f := cmd.Flags()
			if f.Changed("sandboxes") {
				req.Sandboxes = &sandboxes
			}
			if f.Changed("checkpoints") {
				req.Checkpoints = &checkpoints
			}
			if f.Changed("cpus") {
				req.CPUs = &cpus
			}
			if f.Changed("memory") {
				req.Memory = &memory
			}
			if f.Changed("disk") {
				req.Disk = &disk
			}
			if f.Changed("allow-private") {
				grants := []string{}
				for _, p := range private {
					if p = strings.TrimSpace(p); p != "" {
						grants = append(grants, p)
					}
				}
				req.AllowPrivate = &grants
			}
			if req == (api.SetOwnerRequest{}) {
				return cli.Usagef("give at least one of --sandboxes, --memory, --cpus, --disk, --checkpoints, --allow-private", "nothing to set")
			}
			c, err := a.Client()
			if err != nil {
				return err
			}
			o, err := c.SetOwner(cmd.Context(), args[0], req)
			if err != nil {
				return err
			}
			if a.JSON {
				return cli.PrintJSON(a.Stdout, o)
			}
			return renderOwner(a.Stdout, o)
		},
	}
	f := cmd.Flags()
	f.IntVar(&sandboxes, "sandboxes", 0, "sandboxes it may have (0: no limit)")
	f.StringVar(&memory, "memory", "", "memory its sandboxes' limits may add up to, e.g. 16G (0: no limit)")
	f.Float64Var(&cpus, "cpus", 0, "CPUs its sandboxes' limits may add up to (0: no limit)")
	f.StringVar(&disk, "disk", "", "disk its sandboxes' caps may add up to, e.g. 100G (0: no limit; when set, each sandbox needs a cap)")
	f.IntVar(&checkpoints, "checkpoints", 0, "manual checkpoints it may keep (0: no limit)")
	f.StringSliceVar(&private, "allow-private", nil, "private ranges its network rules may name, CIDR[,CIDR] (replaces its grants)")
	return cmd
}

func (a *app) ownerResetCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "reset OWNER",
		Short:   "Give an owner dend's default quota and no grants again (admin)",
		Example: "  den owner reset agent",
		Args:    cli.Args("OWNER"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.Client()
			if err != nil {
				return err
			}
			if err := c.ResetOwner(cmd.Context(), args[0]); err != nil {
				return err
			}
			fmt.Fprintf(a.Stderr, "owner %s has dend's default quota again\n", args[0])
			return nil
		},
	}
}

// ownersByID fetches the owners for `den token ls`; nil when this dend
// has none to give (an older one) or the caller may not list them.
func ownersByID(cmd *cobra.Command, c *client.Client) map[string]api.Owner {
	list, err := c.ListOwners(cmd.Context())
	if err != nil {
		return nil
	}
	m := make(map[string]api.Owner, len(list))
	for _, o := range list {
		m[o.ID] = o
	}
	return m
}
