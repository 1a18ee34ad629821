package sandbox

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
	// Spec.Validate, which create runs, checks them.
	s := Spec{Image: "busybox", CPUs: 1, MemoryBytes: 1 << 30, Labels: many(65)}
	if err := s.Validate(); !errors.Is(err, errdefs.ErrInvalid) {
		t.Fatalf("a spec with 65 labels: %v", err)
	}
}
