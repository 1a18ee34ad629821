package specs

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/den-dev/den/internal/errdefs"
)

// TestValidateLabels: labels are bounded in count and size and must be
// printable; each refusal is bad input with a hint.
func TestValidateLabels(t *testing.T) {
	many := func(n int) map[string]string {
		m := make(map[string]string, n)
		for i := range n {
			m[fmt.Sprintf("k%d", i)] = strings.Repeat("v", 255)
		}
		return m
	}
	for _, tc := range []struct {
		name   string
		labels map[string]string
		ok     bool
	}{
		{"none", nil, true},
		{"e2b-style metadata", map[string]string{"userId": "u-123", "session": "ab/cd é"}, true},
		{"64 of the largest", many(64), true},
		{"65", many(65), false},
		{"3000", many(3000), false},
		{"empty key", map[string]string{"": "v"}, false},
		{"long key", map[string]string{strings.Repeat("k", 64): "v"}, false},
		{"long value", map[string]string{"k": strings.Repeat("v", 256)}, false},
		{"escape in value", map[string]string{"k": "\x1b]0;owned\x07"}, false},
		{"newline in key", map[string]string{"a\nb": "v"}, false},
		{"invalid UTF-8", map[string]string{"k": "\xff"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateLabels(tc.labels)
			if tc.ok != (err == nil) {
				t.Fatalf("got %v, want accepted %v", err, tc.ok)
			}
			if err != nil && (!errors.Is(err, errdefs.ErrInvalid) || errdefs.Hint(err) == "") {
				t.Fatalf("%v: want an invalid-argument error with a hint", err)
			}
		})
	}
}

func TestValidateName(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"web", true},
		{"a", true},
		{"web-2", true},
		{strings.Repeat("a", 63), true},
		{"", false},
		{strings.Repeat("a", 64), false},
		{"-web", false},
		{"web-", false},
		{"Web", false},
		{"web_2", false},
		{"web.example", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateName("sandbox", tc.name)
			if tc.ok != (err == nil) {
				t.Fatalf("got %v, want accepted %v", err, tc.ok)
			}
			if err != nil && (!errors.Is(err, errdefs.ErrInvalid) || !strings.Contains(err.Error(), "invalid sandbox name") || errdefs.Hint(err) == "") {
				t.Fatalf("%v: want an invalid sandbox name with a hint", err)
			}
		})
	}
}

func TestValidateEnv(t *testing.T) {
	if err := ValidateEnv(map[string]string{"PATH": "/bin", "_x1": ""}); err != nil {
		t.Fatalf("valid names: %v", err)
	}
	// The first bad name in sorted order is the one named.
	err := ValidateEnv(map[string]string{"b-c": "", "1a": "", "OK": ""})
	if !errors.Is(err, errdefs.ErrInvalid) || !strings.Contains(err.Error(), `"1a"`) {
		t.Fatalf("got %v, want invalid naming \"1a\"", err)
	}
}
