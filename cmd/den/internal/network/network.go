package network

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/cmd/den/internal/cli"
)

// Flags are the flags that set a network policy, on create and on
// `den network`.
type Flags struct {
	mode  string
	allow []string
}

// Register adds the flags to cmd, the mode as modeFlag.
func (f *Flags) Register(cmd *cobra.Command, modeFlag string) {
	cmd.Flags().StringVar(&f.mode, modeFlag, "", "network mode: none (reach nothing), allow (only the --allow rules) or open (the internet)")
	cmd.Flags().StringArrayVar(&f.allow, "allow", nil, "admit a CIDR, address or domain, optionally :PORT[,PORT...]; repeatable; implies mode allow")
}

// Policy is the policy the flags ask for, or nil when none was given.
func (f *Flags) Policy() *api.NetworkPolicy {
	if f.mode == "" && len(f.allow) == 0 {
		return nil
	}
	p := &api.NetworkPolicy{Mode: f.mode, Allow: f.allow}
	if p.Mode == "" {
		p.Mode = api.NetworkAllow
	}
	return p
}

func (a *app) networkCommand() *cobra.Command {
	var flags Flags
	cmd := &cobra.Command{
		Use:   "network NAME",
		Short: "Show or change what a sandbox may reach",
		Long: `Show or replace a sandbox's network policy. It takes effect at once on a
running or paused sandbox, is kept across hibernate and restore, and forks
inherit it.

  none   reach nothing, not even a name server (the default)
  allow  reach only what the --allow rules name
  open   reach the internet

Whatever the mode, the host and dend, other sandboxes, link-local (cloud
metadata) addresses and private ranges are denied unless a rule names them by
CIDR. Names resolve only through den's resolver, which answers only names a
rule allows and admits only the addresses it answered; DNS to any other server
is dropped, so it cannot carry data out.

A rule is a CIDR, an address or a domain, optionally with ports:
198.51.100.0/24, 203.0.113.7:5432, pypi.org:443, *.pythonhosted.org:80,443.
A domain rule never admits a private address; add its CIDR for that.`,
		Example: `  den network web
  den network web --allow pypi.org:443 --allow '*.pythonhosted.org:443'
  den network web --mode open
  den network web --mode open --allow 10.1.2.0/24   # the internet and one private range
  den network web --mode none`,
		Args: cli.Args("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.Client()
			if err != nil {
				return err
			}
			var sb *api.Sandbox
			if p := flags.Policy(); p != nil {
				sb, err = c.SetNetwork(cmd.Context(), args[0], *p)
			} else {
				sb, err = c.GetSandbox(cmd.Context(), args[0])
			}
			if err != nil {
				return err
			}
			if a.JSON {
				return cli.PrintJSON(a.Stdout, sb.Network)
			}
			return renderNetwork(a.Stdout, sb.Network)
		},
	}
	flags.Register(cmd, "mode")
	return cmd
}

func renderNetwork(w io.Writer, p api.NetworkPolicy) error {
	if _, err := fmt.Fprintf(w, "mode   %s\n", p.Mode); err != nil {
		return err
	}
	if len(p.Allow) == 0 {
		return nil
	}
	_, err := fmt.Fprintf(w, "allow  %s\n", strings.Join(p.Allow, "\n       "))
	return err
}
