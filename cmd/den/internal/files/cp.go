package files

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/den-dev/den/client"
	"github.com/den-dev/den/cmd/den/internal/cli"
)

// location is one side of den cp: a local path, or a path in a sandbox.
type location struct {
	sandbox string // "" for a local path
	path    string
}

func (l location) remote() bool { return l.sandbox != "" }

func (l location) String() string {
	if l.remote() {
		return l.sandbox + ":" + l.path
	}
	return l.path
}

const cpUsageHint = "write it as `den cp SRC NAME:/path` or `den cp NAME:/path DST`"

// parseLocation reads NAME:/path as a sandbox path and anything else as a
// local one. A local path with a colon can be written ./a:b.
func parseLocation(s string) (location, error) {
	if s == "" {
		return location{}, cli.Usagef(cpUsageHint, "empty path")
	}
	if strings.HasPrefix(s, "/") || strings.HasPrefix(s, ".") {
		return location{path: s}, nil
	}
	name, p, ok := strings.Cut(s, ":")
	if !ok || strings.Contains(name, "/") {
		return location{path: s}, nil
	}
	switch {
	case name == "":
		return location{}, cli.Usagef(cpUsageHint, "missing the sandbox name before the colon in %q", s)
	case p == "":
		return location{}, cli.Usagef(cpUsageHint, "missing the path after %q", name+":")
	case !strings.HasPrefix(p, "/"):
		return location{}, cli.Usagef("use an absolute path, e.g. "+name+":/root/"+p, "the path inside the sandbox must be absolute: %q", s)
	}
	return location{sandbox: name, path: p}, nil
}

// parseCpArgs decides which side of a copy is the sandbox: exactly one.
func parseCpArgs(src, dst string) (from, to location, err error) {
	if from, err = parseLocation(src); err != nil {
		return
	}
	if to, err = parseLocation(dst); err != nil {
		return
	}
	switch {
	case from.remote() && to.remote():
		err = cli.Usagef("copy to a local directory first, then from there", "cannot copy between two sandboxes (%s and %s)", from, to)
	case !from.remote() && !to.remote():
		err = cli.Usagef(cpUsageHint, "neither %q nor %q is a sandbox path (NAME:/path)", src, dst)
	}
	return
}

func (a *app) cpCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "cp SRC DST",
		Short: "Copy files and directories between the host and a sandbox",
		Long: `Copy a file or a directory tree between this machine and a sandbox. Exactly one
of SRC and DST is a sandbox path, written NAME:/absolute/path.

Naming works like docker cp: copying a directory "a" to an existing directory
"d" gives "d/a"; to a path that does not exist, it gives that path. End SRC with
"/." to copy a directory's contents instead. "-" as SRC reads a tar stream from
stdin into the sandbox directory DST; "-" as DST writes a tar stream of SRC to
stdout. A progress bar is shown on a terminal for transfers over 8 MiB.`,
		Example: `  den cp ./app web:/srv/app
  den cp web:/var/log/app.log .
  den cp ./dist/. web:/srv/www
  tar -C src -c . | den cp - web:/srv/src`,
		Args: cli.Args("SRC", "DST"),
		RunE: func(cmd *cobra.Command, args []string) error {
			from, to, err := parseCpArgs(args[0], args[1])
			if err != nil {
				return err
			}
			c, err := a.Client()
			if err != nil {
				return err
			}
			if to.remote() {
				return a.upload(cmd.Context(), c, from.path, to)
			}
			return a.download(cmd.Context(), c, from, to.path)
		},
	}
}

// contentsOnly reports whether p ends in "/." (copy what is inside).
func contentsOnly(p string) bool { return p == "." || strings.HasSuffix(p, "/.") }

// upload copies the local src to dst in a sandbox.
func (a *app) upload(ctx context.Context, c *client.Client, src string, dst location) error {
	if src == "-" {
		return c.WriteArchive(ctx, dst.sandbox, dst.path, a.Stdin)
	}
	st, err := os.Stat(src)
	if err != nil {
		return fmt.Errorf("copying %s: %w", src, err)
	}
	dfi, err := c.Stat(ctx, dst.sandbox, dst.path)
	exists := err == nil
	if err != nil && !client.IsNotFound(err) {
		return err
	}
	dstIsDir := exists && dfi.Type == "dir"
	base := filepath.Base(filepath.Clean(src))

	if st.IsDir() {
		target := dst.path
		switch {
		case exists && !dstIsDir:
			return fmt.Errorf("cannot copy directory %s onto %s: it is not a directory", src, dst)
		case dstIsDir && !contentsOnly(src) && base != "/":
			target = path.Join(dst.path, base)
		}
		bar := a.NewTransferBar(treeSize(src), "copying "+base)
		defer bar.Finish()
		pr, pw := io.Pipe()
		go func() { pw.CloseWithError(writeTar(pw, src, bar)) }()
		err := c.WriteArchive(ctx, dst.sandbox, target, pr)
		pr.CloseWithError(io.ErrClosedPipe) // stops writeTar if the upload failed early
		return err
	}

	if !st.Mode().IsRegular() {
		return fmt.Errorf("cannot copy %s: it is neither a regular file nor a directory", src)
	}
	target := dst.path
	switch {
	case dstIsDir:
		target = path.Join(dst.path, base)
	case !exists && strings.HasSuffix(dst.path, "/"):
		return cli.WithHint(fmt.Errorf("directory %s does not exist", dst), "create it first, or drop the trailing / to name the file")
	}
	f, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("copying %s: %w", src, err)
	}
	defer f.Close()
	bar := a.NewTransferBar(st.Size(), "copying "+base)
	defer bar.Finish()
	return c.WriteFile(ctx, dst.sandbox, target, st.Mode().Perm(), io.TeeReader(f, bar))
}

// download copies src in a sandbox to the local dst.
func (a *app) download(ctx context.Context, c *client.Client, src location, dst string) error {
	if dst == "-" {
		rc, err := c.ReadArchive(ctx, src.sandbox, src.path)
		if err != nil {
			return err
		}
		defer rc.Close()
		_, err = io.Copy(a.Stdout, rc)
		return err
	}
	sfi, err := c.Stat(ctx, src.sandbox, src.path)
	if err != nil {
		return err
	}
	lst, err := os.Stat(dst)
	exists := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	dstIsDir := exists && lst.IsDir()
	base := path.Base(path.Clean(src.path))

	if sfi.Type == "dir" {
		target := dst
		switch {
		case exists && !dstIsDir:
			return fmt.Errorf("cannot copy directory %s onto %s: it is not a directory", src, dst)
		case dstIsDir && !contentsOnly(src.path) && base != "/":
			target = filepath.Join(dst, base)
		}
		if err := os.Mkdir(target, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("copying %s: %w", src, err)
		}
		rc, err := c.ReadArchive(ctx, src.sandbox, src.path)
		if err != nil {
			return err
		}
		defer rc.Close()
		bar := a.NewTransferBar(-1, "copying "+base)
		defer bar.Finish()
		return extractTar(io.TeeReader(rc, bar), target)
	}

	target := dst
	switch {
	case dstIsDir:
		target = filepath.Join(dst, base)
	case !exists && strings.HasSuffix(dst, "/"):
		return cli.WithHint(fmt.Errorf("directory %s does not exist", dst), "create it first, or drop the trailing / to name the file")
	}
	rc, err := c.ReadFile(ctx, src.sandbox, src.path)
	if err != nil {
		return err
	}
	defer rc.Close()
	bar := a.NewTransferBar(sfi.Size, "copying "+base)
	defer bar.Finish()
	return writeLocalFile(target, fs.FileMode(sfi.Mode).Perm(), io.TeeReader(rc, bar))
}

// writeLocalFile writes r to a temporary file beside target, then renames
// it into place, so a failed copy leaves any existing file as it was.
func writeLocalFile(target string, mode fs.FileMode, r io.Reader) error {
	if mode == 0 {
		mode = 0o644
	}
	tmp, err := os.CreateTemp(filepath.Dir(target), ".den-cp-*")
	if err != nil {
		return fmt.Errorf("copying to %s: %w", target, err)
	}
	defer os.Remove(tmp.Name()) // fails harmlessly once renamed
	if _, err := io.Copy(tmp, r); err != nil {
		tmp.Close()
		return fmt.Errorf("copying to %s: %w", target, err)
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("copying to %s: %w", target, err)
	}
	if err := os.Rename(tmp.Name(), target); err != nil {
		return fmt.Errorf("copying to %s: %w", target, err)
	}
	return nil
}
