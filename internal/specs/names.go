package specs

import (
	"maps"
	"regexp"
	"slices"
	"unicode"
	"unicode/utf8"

	"github.com/den-dev/den/internal/errdefs"
)

var nameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// ValidateName checks a sandbox or image name: 1-63 lowercase letters,
// digits and inner dashes, so it can serve as a host name.
func ValidateName(kind, name string) error {
	if nameRE.MatchString(name) {
		return nil
	}
	err := errdefs.Invalid("invalid %s name %q", kind, name)
	return errdefs.WithHint(err, "use 1-63 lowercase letters, digits and dashes, starting and ending with a letter or digit")
}

var envKeyRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// ValidateEnv checks the names of environment variables, in their sorted
// order.
func ValidateEnv(env map[string]string) error {
	for _, k := range slices.Sorted(maps.Keys(env)) {
		if !envKeyRE.MatchString(k) {
			return errdefs.WithHint(errdefs.Invalid("invalid environment variable name %q", k), "use letters, digits and underscores, not starting with a digit")
		}
	}
	return nil
}

// Bounds on a sandbox's labels, which every listing and E2B's metadata
// carry: at most MaxLabels, keys of 1 to MaxLabelKey bytes, values of at
// most MaxLabelValue, so together under 20 KiB.
const (
	MaxLabels     = 64
	MaxLabelKey   = 63
	MaxLabelValue = 255
)

// ValidateLabels checks a sandbox's labels: within the bounds above, and
// printable UTF-8, as they are shown in terminals.
func ValidateLabels(labels map[string]string) error {
	if len(labels) > MaxLabels {
		return errdefs.WithHint(errdefs.Invalid("%d labels: more than the %d a sandbox may have", len(labels), MaxLabels),
			"keep what you filter or search on in labels, and the rest in a file in the sandbox")
	}
	const hint = "label keys are 1-63 bytes, values at most 255, both printable UTF-8 text"
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		v := labels[k]
		switch {
		case k == "" || len(k) > MaxLabelKey:
			return errdefs.WithHint(errdefs.Invalid("invalid label key %q: %d bytes", k, len(k)), hint)
		case len(v) > MaxLabelValue:
			return errdefs.WithHint(errdefs.Invalid("invalid label %q: its value is %d bytes", k, len(v)), hint)
		case !printable(k) || !printable(v):
			return errdefs.WithHint(errdefs.Invalid("invalid label %q=%q: not printable text", k, v), hint)
		}
	}
	return nil
}

// printable reports whether s is valid UTF-8 with no control characters.
func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return false
		}
	}
	return true
}
