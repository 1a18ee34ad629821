package export

import (
	"cmp"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
	"github.com/den-dev/den/cmd/den/internal/cli"
)

func (a *app) exportCommand() *cobra.Command {
	var (
		fsOnly  bool
		keyFile string
		output  string
	)
	cmd := &cobra.Command{
		Use:   "export NAME",
		Short: "Write a sandbox's record and newest checkpoint as a sealed archive",
		Long: `Write an agent as one sealed archive another den can import: its record (image
by digest, limits, env, network and idle policy, setup steps, kept paths,
labels, the names of the secrets it is granted, never their values) and its
newest checkpoint: its files and, unless --fs-only, its memory and processes.
A running or paused sandbox is checkpointed first; a hibernated one exports the
checkpoint it sleeps in; a stopped one, a files-only checkpoint of its files.

The archive is encrypted and authenticated under a fresh random key printed on
stderr (or the key in --key-file, 64 hex digits): keep it, ` + "`den import`" + ` needs it.
The memory of a sandbox ever granted secrets is not exported (its images are
sealed under this den's key): export it with --fs-only.

The summary goes to stderr (as JSON with --json); the archive to stdout or -o.`,
		Example: `  den export agent > agent.den
  den export agent -o agent.den --fs-only
  den export agent --key-file team.key > agent.den`,
		Args: cli.Args("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			o := client.ExportOptions{FSOnly: fsOnly}
			if keyFile != "" {
				var err error
				if o.Key, err = readKey(keyFile); err != nil {
					return err
				}
			}
			if output == "" && cli.IsTerminal(a.Stdout) {
				return cli.Usagef("e.g. den export "+args[0]+" > "+args[0]+".den, or -o "+args[0]+".den", "the archive is binary: redirect stdout or give -o FILE")
			}
			c, err := a.Client()
			if err != nil {
				return err
			}
			x, err := c.Export(cmd.Context(), args[0], o)
			if err != nil {
				return err
			}
			defer x.Close()
			if err := a.writeArchive(x, output); err != nil {
				return fmt.Errorf("exporting sandbox %q: %w", args[0], err)
			}
			return a.sayExported(args[0], output, x)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&fsOnly, "fs-only", false, "its files only, without its memory and processes")
	f.StringVar(&keyFile, "key-file", "", "seal it with the key in this file (64 hex digits) instead of a fresh one")
	f.StringVarP(&output, "output", "o", "", "write the archive to FILE (default: stdout)")
	return cmd
}

// readKey reads an archive key from file: its text, trimmed.
func readKey(file string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("reading the archive key: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// writeArchive copies the archive to stdout, or to file, whole or not at
// all.
func (a *app) writeArchive(r io.Reader, file string) error {
	if file == "" {
		_, err := io.Copy(a.Stdout, r)
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(file), "."+filepath.Base(file)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, r); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), file)
}

// exported is what `den export --json` says.
type exported struct {
	Sandbox string   `json:"sandbox"`
	File    string   `json:"file,omitempty"`
	Memory  bool     `json:"memory"`
	Secrets []string `json:"secrets,omitempty"`
	Key     string   `json:"key,omitempty"`
}

func (a *app) sayExported(name, file string, x *client.Export) error {
	if a.JSON {
		return cli.PrintJSON(a.Stderr, exported{Sandbox: name, File: file, Memory: x.Memory, Secrets: x.Secrets, Key: x.Key})
	}
	what := "its files"
	if x.Memory {
		what = "its files and processes"
	}
	fmt.Fprintf(a.Stderr, "exported %s (%s)\n", name, what)
	if len(x.Secrets) > 0 {
		fmt.Fprintf(a.Stderr, "it needs these secrets where it is imported: %s\n", strings.Join(x.Secrets, ", "))
	}
	file = cmp.Or(file, name+".den")
	if x.Key != "" {
		fmt.Fprintf(a.Stderr, "import with: den import %s --key %s\n", file, x.Key)
	} else {
		fmt.Fprintf(a.Stderr, "import with: den import %s --key-file KEYFILE\n", file)
	}
	return nil
}

func (a *app) importCommand() *cobra.Command {
	var key, keyFile, name string
	cmd := &cobra.Command{
		Use:   "import FILE",
		Short: "Make a sandbox of an archive `den export` wrote",
		Long: `Make the agent in an archive ` + "`den export`" + ` wrote (FILE, or - for stdin) a
sandbox of yours on this den, with the key it was sealed with (--key, or
--key-file). One exported with its processes comes back hibernated and wakes,
processes and all, on first use; one exported with its files only comes back
stopped and boots on ` + "`den start`" + `.

Its record is checked as a create is (name, limits and quota, network within
your grants, setup steps). The secrets it is granted must be set here first
(` + "`den secret set NAME`" + `). A damaged, cut or altered archive, or the wrong key,
is refused and leaves nothing behind.`,
		Example: `  den import agent.den --key 3f1c…
  den import agent.den --key-file team.key --name agent-2
  ssh old-host den export agent | den import - --key-file team.key`,
		Args: cli.Args("FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case key != "" && keyFile != "":
				return cli.Usagef("give one of them", "--key and --key-file both given")
			case keyFile != "":
				var err error
				if key, err = readKey(keyFile); err != nil {
					return err
				}
			case key == "":
				return cli.Usagef("e.g. den import "+args[0]+" --key KEY (the key `den export` printed)", "missing --key or --key-file")
			}
			in := a.Stdin
			if args[0] != "-" {
				f, err := os.Open(args[0])
				if err != nil {
					return err
				}
				defer f.Close()
				in = f
			}
			c, err := a.Client()
			if err != nil {
				return err
			}
			res, err := c.Import(cmd.Context(), in, client.ImportOptions{Key: key, Name: name})
			if err != nil {
				return err
			}
			if a.JSON {
				return cli.PrintJSON(a.Stdout, res)
			}
			renderImport(a.Stdout, res)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&key, "key", "", "the key the archive was sealed with, as `den export` printed it")
	f.StringVar(&keyFile, "key-file", "", "read the key from this file")
	f.StringVar(&name, "name", "", "the sandbox's name here (default: its name in the archive)")
	return cmd
}

func renderImport(w io.Writer, res *api.Import) {
	if res.Memory {
		fmt.Fprintf(w, "imported %s as %s: hibernated with its processes; it wakes on first use\n", res.From, res.Sandbox.Name)
	} else {
		fmt.Fprintf(w, "imported %s as %s: stopped with its files; `den start %s` boots it\n", res.From, res.Sandbox.Name, res.Sandbox.Name)
	}
	if len(res.Secrets) > 0 {
		fmt.Fprintf(w, "granted secrets: %s\n", strings.Join(res.Secrets, ", "))
	}
	if res.ImageNote != "" {
		fmt.Fprintf(w, "note: %s\n", res.ImageNote)
	}
}
