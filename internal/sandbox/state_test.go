package sandbox

import (
	"errors"
	"testing"

	"github.com/den-dev/den/internal/errdefs"
)

func TestTransitionTable(t *testing.T) {
	tests := []struct {
		from, to State
		ok       bool
	}{
		{StateCreating, StateRunning, true},
		{StateRunning, StateStopped, true},
		{StateStopped, StateRunning, true},
		{StateStopped, StatePaused, false},
		{StateStopped, StateHibernated, false},
		{StateDestroyed, StateRunning, false},
		{StateError, StateRunning, true},
		{StateError, StateError, true}, // a recovery that failed again
		{StateHibernated, StatePaused, false},
	}
	for _, tt := range tests {
		t.Run(string(tt.from)+"->"+string(tt.to), func(t *testing.T) {
			if got := CanTransition(tt.from, tt.to); got != tt.ok {
				t.Fatalf("CanTransition(%s, %s) = %v, want %v", tt.from, tt.to, got, tt.ok)
			}
		})
	}
	for from, targets := range transitions {
		for _, to := range targets {
			if !to.Valid() {
				t.Errorf("%s lists unknown target %q", from, to)
			}
		}
	}
}

func TestRequireNamesStateAndHint(t *testing.T) {
	sb := &Sandbox{Name: "web", State: StateStopped}
	err := Require(sb, "exec in", StateRunning)
	if !errors.Is(err, errdefs.ErrConflict) {
		t.Fatalf("want conflict, got %v", err)
	}
	if got, want := err.Error(), `cannot exec in sandbox "web": it is stopped`; got != want {
		t.Fatalf("message %q, want %q", got, want)
	}
	if errdefs.Hint(err) == "" {
		t.Fatalf("no hint for a stopped sandbox")
	}
	if err := Require(sb, "start", StateStopped, StateError); err != nil {
		t.Fatalf("require allowed state: %v", err)
	}
}
