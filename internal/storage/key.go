package storage

import (
	"strings"

	"github.com/den-dev/den/internal/errdefs"
)

// Key rules.
const (
	MaxKeySegments   = 4
	maxSegmentLength = 128
)

// ValidateKey checks a volume key: 1 to 4 segments joined by "/", each a
// lowercase letter or digit followed by up to 127 of [a-z0-9._@-], and no
// "..". A valid key never names anything outside the pool, and never starts
// with "." (drivers keep their own bookkeeping under dot-names).
func ValidateKey(key string) error {
	if key == "" {
		return errdefs.Invalid("volume key is empty")
	}
	if strings.Contains(key, "..") {
		return errdefs.Invalid("volume key %q contains %q", key, "..")
	}
	segs := strings.Split(key, "/")
	if len(segs) > MaxKeySegments {
		return errdefs.Invalid("volume key %q has %d segments; at most %d are allowed", key, len(segs), MaxKeySegments)
	}
	for _, s := range segs {
		if p := segmentProblem(s); p != "" {
			return errdefs.Invalid("volume key %q: %s", key, p)
		}
	}
	return nil
}

// segmentProblem says what is wrong with one segment of a key, or "".
func segmentProblem(s string) string {
	switch {
	case s == "":
		return `empty segment (leading, trailing or doubled "/")`
	case len(s) > maxSegmentLength:
		return "segment longer than 128 characters"
	case !isLowerAlnum(s[0]):
		return "a segment must start with a lowercase letter or a digit"
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !isLowerAlnum(c) && c != '.' && c != '_' && c != '@' && c != '-' {
			return "a segment may hold only a-z, 0-9, '.', '_', '@' and '-'"
		}
	}
	return ""
}

func isLowerAlnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }

// ValidatePrefix checks a List prefix: "" or the start of a valid key. The
// segments before its last "/" must be whole valid segments.
func ValidatePrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	dir, last := SplitKey(prefix)
	probe := prefix
	if last == "" {
		probe = dir // "images/" lists what is under "images"
	}
	if err := ValidateKey(probe); err != nil {
		return errdefs.Invalid("volume prefix %q is not the start of a valid key", prefix)
	}
	return nil
}

// SplitKey splits a key at its last "/": "images/debian" gives "images"
// and "debian"; "base" gives "" and "base".
func SplitKey(key string) (dir, name string) {
	i := strings.LastIndexByte(key, '/')
	if i < 0 {
		return "", key
	}
	return key[:i], key[i+1:]
}
