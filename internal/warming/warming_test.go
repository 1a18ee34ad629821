package warming

import (
	"context"
	"errors"
	"testing"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/sandbox"
	"github.com/den-dev/den/internal/warm"
)

type noPools struct{}

func (noPools) Pools() *warm.Pools { return nil }
func (noPools) FreeSlots() int     { return 0 }

type noImages struct{}

func (noImages) GetImage(context.Context, string) (*sandbox.Image, error) {
	return nil, errdefs.NotFound("no image")
}

func TestWithoutPools(t *testing.T) {
	s := New(Config{Sandboxes: noPools{}, Images: noImages{}})
	if _, err := s.SetWarm(context.Background(), "busybox", 1, 0); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("SetWarm without pools: %v, want unavailable", err)
	}
	if p := s.WarmPools(context.Background()); p != nil {
		t.Fatalf("WarmPools without pools: %v, want nil", p)
	}
}

func TestNoInstancesWithoutDirOrNamingEngine(t *testing.T) {
	w, err := NewInstances(InstancesConfig{})
	if err != nil || w != nil {
		t.Fatalf("NewInstances with no engine and no dir = %v, %v; want nil, nil", w, err)
	}
}
