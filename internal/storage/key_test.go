package storage

import (
	"errors"
	"strings"
	"testing"

	"github.com/den-dev/den/internal/errdefs"
)

func TestValidateKey(t *testing.T) {
	long := strings.Repeat("a", 128)
	tests := []struct {
		key string
		ok  bool
	}{
		{"images/debian", true},
		{"sandboxes/sb-1234", true},
		{"checkpoints/sb-1/c_2@v1.0", true},
		{"a/b/c/d", true},
		{"0", true},
		{long, true},
		{"", false},
		{"/abs", false},
		{"a/../b", false},
		{"a..b", false},
		{"..", false},
		{".hidden", false},
		{"A", false},
		{"images/Debian", false},
		{"a//b", false},
		{"a/", false},
		{"a/b/c/d/e", false},
		{"-a", false},
		{"_a", false},
		{"a b", false},
		{"a\x00b", false},
		{"a/b:c", false},
		{long + "a", false},
	}
	for _, tt := range tests {
		err := ValidateKey(tt.key)
		if tt.ok && err != nil {
			t.Errorf("ValidateKey(%q) = %v, want nil", tt.key, err)
		}
		if !tt.ok && !errors.Is(err, errdefs.ErrInvalid) {
			t.Errorf("ValidateKey(%q) = %v, want ErrInvalid", tt.key, err)
		}
	}
}

func TestValidatePrefix(t *testing.T) {
	for _, p := range []string{"", "images/", "images/deb", "i", "a/b/c/d/"} {
		if err := ValidatePrefix(p); err != nil {
			t.Errorf("ValidatePrefix(%q) = %v, want nil", p, err)
		}
	}
	for _, p := range []string{"/", "/images", "images//", "..", "a/../", "A/", "a/b/c/d/e/"} {
		if err := ValidatePrefix(p); !errors.Is(err, errdefs.ErrInvalid) {
			t.Errorf("ValidatePrefix(%q) = %v, want ErrInvalid", p, err)
		}
	}
}

func TestSplitKey(t *testing.T) {
	for _, tt := range []struct{ key, dir, name string }{
		{"base", "", "base"},
		{"images/debian", "images", "debian"},
		{"a/b/c", "a/b", "c"},
		{"images/", "images", ""},
	} {
		dir, name := SplitKey(tt.key)
		if dir != tt.dir || name != tt.name {
			t.Errorf("SplitKey(%q) = %q, %q; want %q, %q", tt.key, dir, name, tt.dir, tt.name)
		}
	}
}
