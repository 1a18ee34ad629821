package sandbox

import (
	"errors"
	"testing"

	"github.com/den-dev/den/internal/errdefs"
)

func TestEngineCompatibility(t *testing.T) {
	here := EngineInfo{Version: "v1", Flags: []string{"--a"}, CPUFeatures: []string{"sse", "avx"}}
	if err := (EngineInfo{Version: "v1", Flags: []string{"--a"}, CPUFeatures: []string{"avx"}}).Compatible(here); err != nil {
		t.Fatalf("subset of features: %v", err)
	}
	for name, e := range map[string]EngineInfo{
		"version": {Version: "v0", Flags: []string{"--a"}},
		"flags":   {Version: "v1", Flags: []string{"--b"}},
		"cpu":     {Version: "v1", Flags: []string{"--a"}, CPUFeatures: []string{"avx512f"}},
	} {
		err := e.Compatible(here)
		if !errors.Is(err, errdefs.ErrConflict) || errdefs.Hint(err) == "" {
			t.Errorf("%s mismatch: %v, want conflict with a hint", name, err)
		}
	}
}

func TestForkChildNames(t *testing.T) {
	names, err := ForkParams{Name: "kid", Count: 3}.childNames()
	if err != nil || len(names) != 3 || names[0] != "kid-1" || names[2] != "kid-3" {
		t.Fatalf("names %v, %v", names, err)
	}
	for _, p := range []ForkParams{{Name: "kid", Count: -1}, {Name: "kid", Count: MaxForkCount + 1}, {Name: "Bad_Name"}} {
		if _, err := p.childNames(); !errors.Is(err, errdefs.ErrInvalid) {
			t.Errorf("%+v: %v, want invalid", p, err)
		}
	}
}
