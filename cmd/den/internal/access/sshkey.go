package access

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/cmd/den/internal/cli"
)

func (a *app) sshKeyCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "ssh-key COMMAND",
		Short: "Manage the public keys of dend's SSH gateway",
		Long: `Manage the public keys that reach sandboxes through dend's SSH gateway
(dend --ssh-listen ADDR). With a key registered,

  ssh SANDBOX@HOST -p PORT            a shell in the sandbox
  ssh SANDBOX@HOST -p PORT CMD        a command, with its exit status
  scp -P PORT FILE SANDBOX@HOST:      files both ways (and sftp)
  ssh -L 8888:localhost:8888 SANDBOX@HOST -p PORT -N
                                      a port inside the sandbox, on yours

A key belongs to the token that registered it (DEN_TOKEN) and acts with its
rights: an owner token's key reaches its owner's sandboxes only, an admin's
every sandbox. When the token is revoked its keys stop working. Root on the
unix socket has no token, so it registers no keys: make a token first.`,
		Example: `  den ssh-key add laptop --key ~/.ssh/id_ed25519.pub
  den ssh-key ls
  den ssh-key rm laptop`,
		Args: cli.Subcommands("ssh-key", "add, ls, rm"),
		RunE: func(*cobra.Command, []string) error { return nil },
	}
	cmd.AddCommand(a.sshKeyAddCommand(), a.sshKeyLsCommand(), a.sshKeyRmCommand())
	return cmd
}

// maxKeyFile bounds what `ssh-key add` reads: a public key is one line.
const maxKeyFile = 64 << 10

func (a *app) sshKeyAddCommand() *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "add NAME --key FILE.pub",
		Short: "Register a public key for your token",
		Long: `Register a public key for the SSH gateway under NAME, for the token you call
with. FILE is a public key as ssh-keygen writes it (FILE.pub); - reads stdin.
A private key, several keys, a key with options, a key registered already or
a name your token uses already are refused, and nothing changes.`,
		Example: `  den ssh-key add laptop --key ~/.ssh/id_ed25519.pub
  ssh-add -L | head -1 | den ssh-key add agent --key -`,
		Args: cli.Args("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if file == "" {
				return cli.Usagef("give the public key file, e.g. --key ~/.ssh/id_ed25519.pub", "missing --key")
			}
			text, err := readKeyFile(a.Stdin, file)
			if err != nil {
				return err
			}
			c, err := a.Client()
			if err != nil {
				return err
			}
			k, err := c.AddSSHKey(cmd.Context(), args[0], string(text))
			if err != nil {
				return err
			}
			if a.JSON {
				return cli.PrintJSON(a.Stdout, k)
			}
			fmt.Fprintf(a.Stdout, "%s %s %s\n", k.Name, k.Type, k.Fingerprint)
			return nil
		},
	}
	cmd.Flags().StringVar(&file, "key", "", "the public key file (FILE.pub), or - for stdin")
	return cmd
}

// readKeyFile reads a key file, or stdin for "-", refusing a large one.
func readKeyFile(stdin io.Reader, file string) ([]byte, error) {
	r := stdin
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return nil, fmt.Errorf("reading the key: %w", err)
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, maxKeyFile+1))
	if err != nil {
		return nil, fmt.Errorf("reading the key: %w", err)
	}
	if len(b) > maxKeyFile {
		return nil, cli.Usagef("give the FILE.pub ssh-keygen wrote", "%s is over %d KiB: not a public key", file, maxKeyFile>>10)
	}
	return b, nil
}

func (a *app) sshKeyLsCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List your token's SSH keys (an admin's: every key)",
		Example: "  den ssh-key ls\n  den ssh-key ls --json",
		Args:    cli.Args(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.Client()
			if err != nil {
				return err
			}
			ks, err := c.ListSSHKeys(cmd.Context())
			if err != nil {
				return err
			}
			return cli.PrintList(a.App, ks, func() error { return renderSSHKeys(a.Stdout, ks, time.Now()) })
		},
	}
}

func renderSSHKeys(w io.Writer, ks []api.SSHKey, now time.Time) error {
	t := cli.NewTable(w, "NAME", "TYPE", "FINGERPRINT", "TOKEN", "CREATED", "COMMENT")
	for _, k := range ks {
		t.Row(k.Name, k.Type, k.Fingerprint, k.TokenID, cli.Ago(k.CreatedAt, now), k.Comment)
	}
	return t.Flush()
}

func (a *app) sshKeyRmCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "rm NAME|FINGERPRINT...",
		Aliases: []string{"remove"},
		Short:   "Remove SSH keys",
		Example: "  den ssh-key rm laptop\n  den ssh-key rm SHA256:9Lq6...",
		Args:    cli.AtLeast("NAME|FINGERPRINT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.Client()
			if err != nil {
				return err
			}
			return a.EachDone(args, func(ref string) error {
				return c.RemoveSSHKey(cmd.Context(), ref)
			})
		},
	}
}
