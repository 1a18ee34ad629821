package files

import (
	"errors"
	"net/http"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/guest"
)

// A file's user extended attributes (user.*): what callers keep on a
// file beside its content, such as the metadata E2B's SDKs attach to
// uploads. den-init reports them with each file and sets them on a write;
// a write keeps those of the file it replaces, as a write in place would.
// Other namespaces (security.*, trusted.*, system.*) are the kernel's and
// are neither shown nor set.

// xattrPrefix is the namespace den-init shows and sets.
const xattrPrefix = "user."

// readXattrs returns the user.* attributes of the file at p, without
// following a final symlink (Linux allows none on symlinks); nil when it
// has none or its file system keeps none.
func readXattrs(p string) map[string]string {
	names, err := listXattrs(p)
	if err != nil || len(names) == 0 {
		return nil
	}
	var out map[string]string
	for _, name := range names {
		if !strings.HasPrefix(name, xattrPrefix) {
			continue
		}
		v, err := getXattr(p, name)
		if err != nil {
			continue // removed meanwhile
		}
		if out == nil {
			out = map[string]string{}
		}
		out[name] = string(v)
	}
	return out
}

func listXattrs(p string) ([]string, error) {
	size, err := unix.Llistxattr(p, nil)
	for err == nil && size > 0 {
		buf := make([]byte, size)
		var n int
		n, err = unix.Llistxattr(p, buf)
		if errors.Is(err, unix.ERANGE) { // grew meanwhile
			size, err = unix.Llistxattr(p, nil)
			continue
		}
		if err != nil {
			return nil, err
		}
		var names []string
		for _, name := range strings.Split(string(buf[:n]), "\x00") {
			if name != "" {
				names = append(names, name)
			}
		}
		return names, nil
	}
	return nil, err
}

func getXattr(p, name string) ([]byte, error) {
	for {
		size, err := unix.Lgetxattr(p, name, nil)
		if err != nil || size == 0 {
			return nil, err
		}
		buf := make([]byte, size)
		n, err := unix.Lgetxattr(p, name, buf)
		if errors.Is(err, unix.ERANGE) {
			continue
		}
		return buf[:n], err
	}
}

// queryXattrs reads a write's attributes: each xattr query parameter is
// NAME=VALUE, NAME in user.*.
func queryXattrs(r *http.Request) (map[string]string, error) {
	vs := r.URL.Query()["xattr"]
	if len(vs) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(vs))
	for _, kv := range vs {
		name, value, ok := strings.Cut(kv, "=")
		if err := guest.ValidateXattr(name, value); !ok || err != nil {
			if err == nil {
				err = errdefs.Invalid("bad xattr %q: give NAME=VALUE", kv)
			}
			return nil, err
		}
		out[name] = value
	}
	return out, nil
}

// setXattrs gives the open file f the user attributes of the file it
// replaces (old, "" for none) but those whose names start with drop
// (when set), then attrs. A file system without attributes fails with
// ENOTSUP only when attrs asked for some.
func setXattrs(f *os.File, old, drop string, attrs map[string]string) error {
	fd := int(f.Fd())
	if old != "" {
		for name, v := range readXattrs(old) {
			if _, given := attrs[name]; given || (drop != "" && strings.HasPrefix(name, drop)) {
				continue
			}
			if err := unix.Fsetxattr(fd, name, []byte(v), 0); err != nil && !errors.Is(err, unix.ENOTSUP) {
				return err
			}
		}
	}
	for name, v := range attrs {
		if err := unix.Fsetxattr(fd, name, []byte(v), 0); err != nil {
			return err
		}
	}
	return nil
}
