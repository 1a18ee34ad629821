package files

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// writeTar writes the contents of the local directory dir to w as a tar
// stream, names relative to dir. Regular files' bytes also go to count (a
// progress bar). Owners are not kept: what lands in a sandbox belongs to
// root, like docker cp. Sockets and devices are skipped.
func writeTar(w io.Writer, dir string, count io.Writer) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		var link string
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		case !info.Mode().IsRegular() && !info.IsDir():
			return nil
		}
		hdr, err := tar.FileInfoHeader(info, link)
		if err != nil {
			return fmt.Errorf("archiving %s: %w", p, err)
		}
		hdr.Name = filepath.ToSlash(rel)
		if info.IsDir() {
			hdr.Name += "/"
		}
		hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = 0, 0, "", ""
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			return nil
		}
		return copyFileInto(tw, p, hdr.Size, count)
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

// copyFileInto writes exactly size bytes of the file at p to tw (a file
// that changes while it is read would otherwise break the archive).
func copyFileInto(tw io.Writer, p string, size int64, count io.Writer) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := io.CopyN(tw, io.TeeReader(f, count), size); err != nil {
		return fmt.Errorf("archiving %s: %w", p, err)
	}
	return nil
}

// treeSize is the total size of the regular files under dir.
func treeSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}

// errUnsafeEntry marks an archive entry that would land outside the target.
var errUnsafeEntry = errors.New("unsafe archive entry")

// checkEntryName refuses absolute names and names with a ".." element.
func checkEntryName(name string) error {
	if strings.HasPrefix(name, "/") || slices.Contains(strings.Split(name, "/"), "..") || strings.ContainsRune(name, 0) {
		return fmt.Errorf("%w %q: it points outside the target directory", errUnsafeEntry, name)
	}
	return nil
}

// extractTar unpacks the tar stream r into the local directory dir, which
// must exist. It refuses entries with absolute names or ".." elements, and
// never follows a symlink out of dir (it writes through an os.Root), so an
// archive cannot touch anything outside dir whatever it contains. Links
// are recreated as they are; devices and fifos are skipped; permissions
// are kept without setuid, setgid and sticky bits; owners are not kept.
func extractTar(r io.Reader, dir string) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	type dirMode struct {
		name string
		mode fs.FileMode
	}
	var dirs []dirMode
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("reading the archive: %w", err)
		}
		if err := checkEntryName(hdr.Name); err != nil {
			return err
		}
		name := path.Clean(hdr.Name)
		if name == "." {
			continue // the target itself
		}
		mode := hdr.FileInfo().Mode().Perm()
		if hdr.Typeflag != tar.TypeDir {
			if err := prepareEntry(root, name); err != nil {
				return err
			}
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := root.MkdirAll(name, 0o700); err != nil {
				return fmt.Errorf("creating %s: %w", name, err)
			}
			dirs = append(dirs, dirMode{name, mode})
		case tar.TypeReg:
			if err := extractFile(root, name, mode, tr); err != nil {
				return err
			}
			_ = root.Chtimes(name, hdr.AccessTime, hdr.ModTime)
		case tar.TypeSymlink:
			if err := root.Symlink(hdr.Linkname, name); err != nil {
				return fmt.Errorf("creating symlink %s: %w", name, err)
			}
		case tar.TypeLink:
			if err := checkEntryName(hdr.Linkname); err != nil {
				return err
			}
			if err := root.Link(path.Clean(hdr.Linkname), name); err != nil {
				return fmt.Errorf("creating link %s: %w", name, err)
			}
		}
	}
	// Directory modes last, so a read-only directory could still be filled.
	for _, d := range slices.Backward(dirs) {
		if err := root.Chmod(d.name, d.mode); err != nil {
			return fmt.Errorf("setting the mode of %s: %w", d.name, err)
		}
	}
	return nil
}

// prepareEntry makes the parent directories of name and removes what is
// at name, so the entry is created fresh rather than written through an
// existing symlink.
func prepareEntry(root *os.Root, name string) error {
	if dir := path.Dir(name); dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("creating %s: %w", dir, err)
		}
	}
	if err := root.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("replacing %s: %w", name, err)
	}
	return nil
}

func extractFile(root *os.Root, name string, mode fs.FileMode, r io.Reader) error {
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return fmt.Errorf("creating %s: %w", name, err)
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", name, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	// The umask may have narrowed mode.
	return root.Chmod(name, mode)
}
