package errdefs

import (
	"errors"
	"fmt"
	"testing"
)

func TestClassSurvivesWrappingAndHints(t *testing.T) {
	base := NotFound("sandbox %q not found", "web")
	err := fmt.Errorf("starting sandbox: %w", WithHint(base, "list sandboxes with `den ls`"))

	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("errors.Is(ErrNotFound) = false for %v", err)
	}
	if errors.Is(err, ErrConflict) {
		t.Fatalf("a not-found error also matched ErrConflict")
	}
	if got := Class(err); got != ErrNotFound {
		t.Fatalf("Class = %v, want ErrNotFound", got)
	}
	if got, want := err.Error(), `starting sandbox: sandbox "web" not found`; got != want {
		t.Fatalf("message = %q, want %q", got, want)
	}
	if got := Hint(err); got != "list sandboxes with `den ls`" {
		t.Fatalf("Hint = %q", got)
	}
	if Class(errors.New("disk on fire")) != nil {
		t.Fatalf("an unclassified error got a class")
	}
}
