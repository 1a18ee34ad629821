package access

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/docker/go-units"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
	"github.com/den-dev/den/cmd/den/internal/cli"
)

func (a *app) tokenCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "token COMMAND",
		Short: "Manage API tokens (admin)",
		Long: `Manage the API tokens that let programs use dend over TCP (--host and
DEN_TOKEN). A token's scope says what it may do:

  admin        everything
  admin:read   every read, no change
  owner        only the sandboxes it creates, with full control; other
               sandboxes do not exist for it
  owner:read   the reads of owner

Images are read by every scope and changed by admins only; tokens, the audit
log and secrets are for admin scopes only. The unix socket needs no token: its
callers are root.`,
		Example: `  den token create agent --scope owner --expires 720h
  den token create agent-viewer --scope owner:read --for agent
  den token ls
  den token revoke agent`,
		Args: cli.Subcommands("token", "create, ls, revoke"),
		RunE: func(*cobra.Command, []string) error { return nil },
	}
	cmd.AddCommand(a.tokenCreateCommand(), a.tokenLsCommand(), a.tokenRevokeCommand())
	return cmd
}

func (a *app) tokenCreateCommand() *cobra.Command {
	var req api.CreateTokenRequest
	var expires time.Duration
	cmd := &cobra.Command{
		Use:   "create NAME --scope SCOPE",
		Short: "Make an API token and print it, this once",
		Long: `Make an API token and print it on stdout. It is shown only this once: dend
keeps a digest of it, never the token. Give it to a program as DEN_TOKEN.

--for (owner scopes) makes a token that reaches the sandboxes of another owner
token instead of only its own: to rotate a token (make the new one --for the
old, then revoke the old) or to give an agent a read-only companion.`,
		Example: `  den token create agent --scope owner
  export DEN_TOKEN=$(den token create ci --scope owner --expires 24h)
  den token create agent-viewer --scope owner:read --for agent`,
		Args: cli.Args("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			req.Name = args[0]
			if req.Scope == "" {
				return cli.Usagef("choose one of admin, admin:read, owner, owner:read", "missing --scope")
			}
			if expires < 0 {
				return cli.Usagef("give a positive duration such as 24h, or none", "invalid --expires %s", expires)
			}
			if expires > 0 {
				req.Expires = expires.String()
			}
			c, err := a.Client()
			if err != nil {
				return err
			}
			t, err := c.CreateToken(cmd.Context(), req)
			if err != nil {
				return err
			}
			if a.JSON {
				return cli.PrintJSON(a.Stdout, t)
			}
			until := "does not expire"
			if t.ExpiresAt != nil {
				until = "expires " + t.ExpiresAt.Local().Format(time.DateTime)
			}
			fmt.Fprintf(a.Stderr, "made token %s (id %s, scope %s, %s); it is shown only now:\n", t.Name, t.ID, t.Scope, until)
			fmt.Fprintln(a.Stdout, t.Token)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&req.Scope, "scope", "", "admin, admin:read, owner or owner:read")
	f.DurationVar(&expires, "expires", 0, "lifetime, e.g. 24h or 720h (default: does not expire)")
	f.StringVar(&req.For, "for", "", "owner scopes: reach the sandboxes of this token (id or name)")
	return cmd
}

func (a *app) tokenLsCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List API tokens, revoked and expired ones too",
		Example: "  den token ls\n  den token ls --json",
		Args:    cli.Args(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.Client()
			if err != nil {
				return err
			}
			ts, err := c.ListTokens(cmd.Context())
			if err != nil {
				return err
			}
			return cli.PrintList(a.App, ts, func() error { return renderTokens(a.Stdout, ts, ownersByID(cmd, c), time.Now()) })
		},
	}
}

// renderTokens shows the tokens; with owners, owner tokens show their
// owner's use against its quota.
func renderTokens(w io.Writer, ts []api.Token, owners map[string]api.Owner, now time.Time) error {
	header := []string{"ID", "NAME", "SCOPE", "STATUS", "CREATED", "EXPIRES", "LAST USED", "FOR"}
	if owners != nil {
		header = append(header, "USE/QUOTA")
	}
	t := cli.NewTable(w, header...)
	for _, tk := range ts {
		expires := "never"
		if tk.ExpiresAt != nil {
			expires = until(*tk.ExpiresAt, now)
		}
		used := "never"
		if tk.LastUsedAt != nil {
			used = cli.Ago(*tk.LastUsedAt, now)
		}
		forOwner := "-"
		if tk.Owner != "" && tk.Owner != tk.ID {
			forOwner = tk.Owner
		}
		cells := []string{tk.ID, tk.Name, tk.Scope, tk.Status, cli.Ago(tk.CreatedAt, now), expires, used, forOwner}
		if owners != nil {
			use := "-"
			if o, ok := owners[tk.Owner]; ok && tk.Owner != "" {
				use = ownerSummary(o)
			}
			cells = append(cells, use)
		}
		t.Row(cells...)
	}
	return t.Flush()
}

// until says when t comes, or came.
func until(t, now time.Time) string {
	if !t.After(now) {
		return cli.Ago(t, now)
	}
	return "in " + units.HumanDuration(t.Sub(now))
}

func (a *app) tokenRevokeCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "revoke ID|NAME...",
		Aliases: []string{"rm"},
		Short:   "Revoke API tokens at once",
		Example: "  den token revoke agent\n  den token revoke 3f9a1c0b7d2e",
		Args:    cli.AtLeast("ID|NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.Client()
			if err != nil {
				return err
			}
			return a.EachDone(args, func(ref string) error {
				return c.RevokeToken(cmd.Context(), ref)
			})
		},
	}
}

func (a *app) auditCommand() *cobra.Command {
	var q client.AuditQuery
	var since string
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Show the audit log: every call that changed something (admin)",
		Long: `Show the audit log: every call through dend's API that changed, or tried to
change, something, with who made it, when, and how it ended. The newest
--limit entries are shown, oldest first. Request bodies are never recorded.`,
		Example: `  den audit
  den audit --sandbox web --since 24h
  den audit --token agent --limit 20 --json`,
		Args: cli.Args(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if since != "" {
				t, err := parseSince(since, time.Now())
				if err != nil {
					return err
				}
				q.Since = t
			}
			c, err := a.Client()
			if err != nil {
				return err
			}
			entries, err := c.Audit(cmd.Context(), q)
			if err != nil {
				return err
			}
			return cli.PrintList(a.App, entries, func() error { return renderAudit(a.Stdout, entries) })
		},
	}
	f := cmd.Flags()
	f.StringVar(&q.Sandbox, "sandbox", "", "only calls about this sandbox (name or id)")
	f.StringVar(&q.Token, "token", "", "only calls by this token (name or id)")
	f.StringVar(&since, "since", "", "only calls this long ago or later (e.g. 90m, 24h), or since a time (2026-01-02T15:04:05Z)")
	f.IntVar(&q.Limit, "limit", 0, "show the newest N entries (default 100)")
	return cmd
}

func parseSince(v string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	return time.Time{}, cli.Usagef("write a duration such as 90m or 24h (no days: 168h is a week), or a time such as 2026-01-02T15:04:05Z",
		"invalid --since %q", v)
}

func renderAudit(w io.Writer, entries []api.AuditEntry) error {
	t := cli.NewTable(w, "TIME", "WHO", "CALL", "SANDBOX", "STATUS", "ERROR")
	for _, e := range entries {
		sb := e.Sandbox
		if sb == "" {
			sb = "-"
		}
		msg := e.Error
		if msg == "" {
			msg = "-"
		}
		t.Row(e.Time.Local().Format(time.DateTime), e.Who, e.Method+" "+e.Path, sb, fmt.Sprint(e.Status), msg)
	}
	return t.Flush()
}

func (a *app) secretCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "secret COMMAND",
		Short: "Manage secrets (admin)",
		Long: `Manage secrets: named values, such as API keys and passwords, kept
encrypted by dend under a key stored outside its database. Values go in and
never come back out through the API.`,
		Example: `  den secret set OPENAI_API_KEY            # asks for the value
  den secret set DB_PASSWORD --file ./pw.txt
  printf %s "$TOKEN" | den secret set GH_TOKEN
  den secret ls
  den secret rm DB_PASSWORD
  den secret grant web GH_TOKEN                 # $GH_TOKEN in web's commands
  den secret grant web TLS_KEY --file key.pem   # /run/secrets/key.pem
  den secret revoke web GH_TOKEN`,
		Args: cli.Subcommands("secret", "set, ls, rm, grant, revoke"),
		RunE: func(*cobra.Command, []string) error { return nil },
	}
	cmd.AddCommand(a.secretSetCommand(), a.secretLsCommand(), a.secretRmCommand(),
		a.secretGrantCommand(), a.secretRevokeCommand())
	return cmd
}

func (a *app) secretSetCommand() *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "set NAME [--file FILE]",
		Short: "Set a secret from stdin or a file",
		Long: `Set secret NAME (letters, digits and underscores, like an environment
variable) to the contents of FILE, or of stdin; on a terminal it asks for the
value without echoing it. The value is stored byte for byte, at most 64 KiB:
printf %s "$VALUE" | den secret set NAME avoids a trailing newline. The value
is never taken as an argument, which would leave it in shell history and the
process list.`,
		Example: `  den secret set OPENAI_API_KEY
  den secret set DB_PASSWORD --file ./pw.txt
  printf %s "$TOKEN" | den secret set GH_TOKEN`,
		Args: func(cmd *cobra.Command, argv []string) error {
			if len(argv) > 1 {
				return cli.Usagef("pass the value on stdin or with --file, never on the command line",
					"den secret set takes no value argument")
			}
			return cli.Args("NAME")(cmd, argv)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			value, err := a.secretValue(args[0], file)
			if err != nil {
				return err
			}
			c, err := a.Client()
			if err != nil {
				return err
			}
			s, err := c.SetSecret(cmd.Context(), args[0], value)
			if err != nil {
				return err
			}
			if a.JSON {
				return cli.PrintJSON(a.Stdout, s)
			}
			fmt.Fprintln(a.Stdout, s.Name)
			return nil
		},
	}
	cmd.Flags().StringVar(&file, "file", "", "read the value from this file (- for stdin)")
	return cmd
}

// secretValue reads a secret's value from file, or stdin; on a terminal,
// without echo, and an empty answer is refused.
func (a *app) secretValue(name, file string) ([]byte, error) {
	var r io.Reader = a.Stdin
	if file != "" && file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return nil, fmt.Errorf("reading the value of secret %s: %w", name, err)
		}
		defer f.Close()
		r = f
	} else if cli.IsTerminal(a.Stdin) {
		fmt.Fprintf(a.Stderr, "value of %s (not shown): ", name)
		value, err := term.ReadPassword(cli.FdOf(a.Stdin))
		fmt.Fprintln(a.Stderr)
		if err != nil {
			return nil, fmt.Errorf("reading the value of secret %s: %w", name, err)
		}
		if len(value) == 0 {
			return nil, cli.Usagef("type the value, or give it with --file or on stdin", "empty value for secret %s", name)
		}
		return value, nil
	}
	value, err := io.ReadAll(io.LimitReader(r, api.MaxSecretBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading the value of secret %s: %w", name, err)
	}
	if len(value) > api.MaxSecretBytes {
		return nil, cli.WithHint(errors.New("the secret's value is over the 64 KiB limit"),
			"keep secrets to tokens, passwords and keys; copy larger files into the sandbox with `den cp`")
	}
	return value, nil
}

func (a *app) secretLsCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List secrets: names and times, never values",
		Example: "  den secret ls\n  den secret ls --json",
		Args:    cli.Args(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.Client()
			if err != nil {
				return err
			}
			list, err := c.ListSecrets(cmd.Context())
			if err != nil {
				return err
			}
			return cli.PrintList(a.App, list, func() error {
				now := time.Now()
				t := cli.NewTable(a.Stdout, "NAME", "CREATED", "UPDATED")
				for _, s := range list {
					t.Row(s.Name, cli.Ago(s.CreatedAt, now), cli.Ago(s.UpdatedAt, now))
				}
				return t.Flush()
			})
		},
	}
}

func (a *app) secretRmCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "rm NAME...",
		Aliases: []string{"remove"},
		Short:   "Remove secrets",
		Example: "  den secret rm DB_PASSWORD",
		Args:    cli.AtLeast("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.Client()
			if err != nil {
				return err
			}
			return a.EachDone(args, func(name string) error {
				return c.RemoveSecret(cmd.Context(), name)
			})
		},
	}
}
