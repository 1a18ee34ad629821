package network

import (
	"cmp"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/cmd/den/internal/cli"
)

func (a *app) portCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "port COMMAND",
		Short: "Serve ports of a sandbox through dend",
		Long: `Serve a port inside a sandbox through dend: HTTP and WebSocket requests to
/v1/sandboxes/NAME/ports/PORT/proxy/... on dend's address (and to
http://PORT-NAME.DOMAIN/... when dend runs with --ports-domain) go on to that
port of the sandbox. A paused or hibernated sandbox is woken by a request.

A port is private unless exposed with --public: it then needs a token that
reaches the sandbox, or a signed link from ` + "`den port url`" + `. A public port is
open to anyone who can reach dend, and shows in ` + "`den ls`" + `.`,
		Example: `  den port expose web 8080
  den port expose web 3000 --public
  den port url web 8080 --expires 24h
  den port ls web
  den port rm web 3000`,
		Args: cli.Subcommands("port", "expose, rm, ls, url"),
		RunE: func(*cobra.Command, []string) error { return nil },
	}
	cmd.AddCommand(a.portExposeCommand(), a.portRmCommand(), a.portLsCommand(), a.portURLCommand())
	return cmd
}

// parsePortArg reads a port from the command line.
func parsePortArg(s string) (uint16, error) {
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil || n == 0 {
		return 0, cli.Usagef("give a port from 1 to 65535", "invalid port %q", s)
	}
	return uint16(n), nil
}

func (a *app) portExposeCommand() *cobra.Command {
	var public bool
	cmd := &cobra.Command{
		Use:   "expose NAME PORT",
		Short: "Serve a port of a sandbox through dend",
		Long: `Serve a port of a sandbox through dend, private unless --public. Exposing
an exposed port again only changes whether it is public. The server in the
sandbox must listen on 0.0.0.0 (or the sandbox's address), not 127.0.0.1.`,
		Example: `  den port expose web 8080
  den port expose web 8080 --public`,
		Args: cli.Args("NAME", "PORT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			port, err := parsePortArg(args[1])
			if err != nil {
				return err
			}
			c, err := a.Client()
			if err != nil {
				return err
			}
			sb, err := c.ExposePort(cmd.Context(), args[0], port, public)
			if err != nil {
				return err
			}
			return a.printPorts(sb)
		},
	}
	cmd.Flags().BoolVar(&public, "public", false, "open it to anyone who can reach dend, without a token")
	return cmd
}

func (a *app) portRmCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "rm NAME PORT",
		Aliases: []string{"remove", "unexpose"},
		Short:   "Stop serving a port of a sandbox",
		Example: "  den port rm web 8080",
		Args:    cli.Args("NAME", "PORT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			port, err := parsePortArg(args[1])
			if err != nil {
				return err
			}
			c, err := a.Client()
			if err != nil {
				return err
			}
			if err := c.UnexposePort(cmd.Context(), args[0], port); err != nil {
				return err
			}
			if !a.JSON {
				fmt.Fprintln(a.Stdout, port)
			}
			return nil
		},
	}
}

func (a *app) portLsCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "ls NAME",
		Aliases: []string{"list"},
		Short:   "List the ports a sandbox exposes",
		Example: `  den port ls web
  den port ls web --json`,
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
			return a.printPorts(sb)
		},
	}
}

func (a *app) portURLCommand() *cobra.Command {
	var expires time.Duration
	var revoke bool
	cmd := &cobra.Command{
		Use:   "url NAME PORT",
		Short: "Print a link to a port that works without a token until it expires",
		Long: `Print a link to an exposed port that anyone holding it can use, without a
token, until it expires. It reaches every path of that port of that sandbox
(not another sandbox later given the same name). On dend's ports domain a
browser can follow the application's own links with it; under dend's own
address each request must carry it.

Over the unix socket, without a ports domain, den cannot know dend's TCP
address: the link is then printed as a path to append to it.

--revoke ends every link to the port made so far, at once (so does
unexposing the port); links made afterwards work.`,
		Example: `  den port url web 8080
  den port url web 8080 --expires 24h
  den port url web 8080 --revoke`,
		Args: cli.Args("NAME", "PORT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			port, err := parsePortArg(args[1])
			if err != nil {
				return err
			}
			if expires < 0 {
				return cli.Usagef("give a positive duration such as 30m or 24h", "invalid --expires %s", expires)
			}
			if revoke && expires != 0 {
				return cli.Usagef("give one of them", "--revoke and --expires do not go together")
			}
			c, err := a.Client()
			if err != nil {
				return err
			}
			if revoke {
				if err := c.RevokePortURLs(cmd.Context(), args[0], port); err != nil {
					return err
				}
				if !a.JSON {
					fmt.Fprintf(a.Stdout, "signed links to port %d of %s revoked\n", port, args[0])
				}
				return nil
			}
			u, err := c.PortURL(cmd.Context(), args[0], port, expires)
			if err != nil {
				return err
			}
			if a.JSON {
				return cli.PrintJSON(a.Stdout, u)
			}
			if u.URL == "" {
				fmt.Fprintln(a.Stderr, "note: a path under dend's TCP address (dend --listen); valid until", u.ExpiresAt.Local().Format(time.RFC3339))
				_, err = fmt.Fprintln(a.Stdout, u.Path)
				return err
			}
			_, err = fmt.Fprintln(a.Stdout, u.URL)
			return err
		},
	}
	cmd.Flags().DurationVar(&expires, "expires", 0, "how long the link works, up to 720h (default: dend's, 1h)")
	cmd.Flags().BoolVar(&revoke, "revoke", false, "end every link to the port made so far instead")
	return cmd
}

func (a *app) printPorts(sb *api.Sandbox) error {
	return cli.PrintList(a.App, sb.Ports, func() error { return renderPorts(a.Stdout, sb) })
}

func renderPorts(w io.Writer, sb *api.Sandbox) error {
	if len(sb.Ports) == 0 {
		_, err := fmt.Fprintf(w, "%s exposes no ports\n", sb.Name)
		return err
	}
	t := cli.NewTable(w, "PORT", "ACCESS", "PATH")
	for _, p := range sb.Ports {
		access := "private"
		if p.Public {
			access = "public"
		}
		// By id: names are unique only per owner, and a link by name
		// stops working for callers without a token once another
		// owner's sandbox takes the same name.
		t.Row(strconv.Itoa(int(p.Port)), access, fmt.Sprintf("/v1/sandboxes/%s/ports/%d/proxy/", cmp.Or(sb.ID, sb.Name), p.Port))
	}
	return t.Flush()
}
