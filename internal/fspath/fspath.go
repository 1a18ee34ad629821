// Package fspath validates paths that name files inside a sandbox, as they
// arrive from users (through dend's API) and from the host (through
// den-init's protocol). Both sides apply the same rules, so a path dend
// accepts is one den-init accepts.
package fspath

import (
	"path"
	"strings"

	"github.com/den-dev/den/internal/errdefs"
)

// MaxLen is the longest path accepted, the Linux PATH_MAX.
const MaxLen = 4096

const absHint = "use an absolute path inside the sandbox, e.g. /root/notes.txt"

// Clean validates p as an absolute in-sandbox path and returns it cleaned
// (no duplicate or trailing slashes, no "." elements). A path must be
// absolute, hold no NUL byte and no ".." element: ".." is refused rather
// than resolved so that what a caller sees in a path is what it names.
// Errors are errdefs.Invalid with a hint.
func Clean(p string) (string, error) {
	if p == "" {
		return "", errdefs.WithHint(errdefs.Invalid("empty path"), absHint)
	}
	if len(p) > MaxLen {
		return "", errdefs.Invalid("path is %d bytes long, over the %d limit", len(p), MaxLen)
	}
	if strings.IndexByte(p, 0) >= 0 {
		return "", errdefs.Invalid("path %q contains a NUL byte", p)
	}
	if p[0] != '/' {
		return "", errdefs.WithHint(errdefs.Invalid("path %q is not absolute", p), absHint)
	}
	if hasDotDot(p) {
		return "", errdefs.WithHint(errdefs.Invalid("path %q contains a \"..\" element", p),
			"spell the path out without \"..\"")
	}
	return path.Clean(p), nil
}

// Rel validates name as a path relative to some directory, as found in an
// archive entry, and returns it cleaned. It refuses absolute names, NUL
// bytes and names that still hold a ".." element once cleaned (those climb
// out of the directory). The directory itself comes back as ".".
func Rel(name string) (string, error) {
	if name == "" {
		return "", errdefs.Invalid("empty name")
	}
	if len(name) > MaxLen {
		return "", errdefs.Invalid("name is %d bytes long, over the %d limit", len(name), MaxLen)
	}
	if strings.IndexByte(name, 0) >= 0 {
		return "", errdefs.Invalid("name %q contains a NUL byte", name)
	}
	if name[0] == '/' {
		return "", errdefs.Invalid("name %q is absolute", name)
	}
	c := path.Clean(name)
	if hasDotDot(c) {
		return "", errdefs.Invalid("name %q climbs out of its directory", name)
	}
	return c, nil
}

// hasDotDot reports whether a slash-separated path has a ".." element.
func hasDotDot(p string) bool {
	for el := range strings.SplitSeq(p, "/") {
		if el == ".." {
			return true
		}
	}
	return false
}
