package sandbox

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/den-dev/den/internal/errdefs"
)

// TestSpecValidateChecksLabels: Spec.Validate, which create runs, checks
// a spec's labels (internal/specs' ValidateLabels).
func TestSpecValidateChecksLabels(t *testing.T) {
	many := make(map[string]string, 65)
	for i := range 65 {
		many[fmt.Sprintf("k%d", i)] = strings.Repeat("v", 255)
	}
	s := Spec{Image: "busybox", CPUs: 1, MemoryBytes: 1 << 30, Labels: many}
	if err := s.Validate(); !errors.Is(err, errdefs.ErrInvalid) {
		t.Fatalf("a spec with 65 labels: %v", err)
	}
}
