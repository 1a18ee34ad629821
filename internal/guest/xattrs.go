package guest

import (
	"strings"
	"unicode/utf8"

	"github.com/den-dev/den/internal/errdefs"
)

// HeaderXattrsSet answers PUT /v1/files/content with how many of the
// write's xattr parameters were set. A den-init from before attributes
// ignores them and sends no such header, which the client refuses to
// take for success.
const HeaderXattrsSet = "X-Den-Xattrs-Set"

// Bounds of the user attributes a write may set: a file system takes
// names up to 255 bytes; values travel in the request's query.
const (
	MaxXattrs          = 64
	MaxXattrNameBytes  = 255
	MaxXattrValueBytes = 8 << 10
)

// XattrPrefix is the namespace of the attributes den shows and sets.
const XattrPrefix = "user."

// ValidateXattr checks one attribute a write would set.
func ValidateXattr(name, value string) error {
	switch {
	case !strings.HasPrefix(name, XattrPrefix) || len(name) == len(XattrPrefix):
		return errdefs.WithHint(errdefs.Invalid("invalid extended attribute name %q", name),
			"den sets user attributes only: name them user.SOMETHING")
	case len(name) > MaxXattrNameBytes || strings.ContainsRune(name, 0):
		return errdefs.Invalid("invalid extended attribute name %q: at most %d bytes, no NUL", name, MaxXattrNameBytes)
	case len(value) > MaxXattrValueBytes:
		return errdefs.Invalid("extended attribute %q is %d bytes: at most %d", name, len(value), MaxXattrValueBytes)
	case !utf8.ValidString(value):
		return errdefs.Invalid("extended attribute %q is not UTF-8 text", name)
	}
	return nil
}

// ValidateXattrPrefix checks the prefix of the attributes a write leaves
// out of those of the file it replaces (WriteOptions.DropXattrs); empty
// is none.
func ValidateXattrPrefix(prefix string) error {
	switch {
	case prefix == "":
		return nil
	case !strings.HasPrefix(prefix, XattrPrefix):
		return errdefs.WithHint(errdefs.Invalid("invalid xattrs_drop %q", prefix),
			"den drops user attributes only: give a prefix such as user.e2b.")
	case len(prefix) > MaxXattrNameBytes || strings.ContainsRune(prefix, 0):
		return errdefs.Invalid("invalid xattrs_drop %q: at most %d bytes, no NUL", prefix, MaxXattrNameBytes)
	}
	return nil
}
