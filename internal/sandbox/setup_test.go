package sandbox

import (
	"errors"
	"slices"
	"testing"

	"github.com/den-dev/den/internal/errdefs"
)

func TestKeptPaths(t *testing.T) {
	s := Spec{Keep: []string{"/work/deep", "/opt/data", "/root"}}
	want := []string{"/home", "/opt/data", "/root", "/srv", "/work"}
	if got := s.KeptPaths(); !slices.Equal(got, want) {
		t.Errorf("KeptPaths = %q, want %q", got, want)
	}
}

func TestParseImageRef(t *testing.T) {
	for _, c := range []struct {
		ref     string
		name    string
		version int
		bad     bool
	}{
		{"debian", "debian", 0, false},
		{"debian@3", "debian", 3, false},
		{"debian@0", "", 0, true},
		{"debian@03", "", 0, true},
		{"debian@x", "", 0, true},
		{"Debian", "", 0, true},
		{"@2", "", 0, true},
	} {
		name, version, err := ParseImageRef(c.ref)
		if c.bad {
			if !errors.Is(err, errdefs.ErrInvalid) {
				t.Errorf("ParseImageRef(%q) = %v, want invalid", c.ref, err)
			}
			continue
		}
		if err != nil || name != c.name || version != c.version {
			t.Errorf("ParseImageRef(%q) = %q, %d, %v", c.ref, name, version, err)
		}
	}
	for _, c := range []struct {
		name    string
		version int
		key     string
	}{{"debian", 0, "images/debian"}, {"debian", 1, "images/debian"}, {"debian", 4, "images/debian@4"}} {
		key := ImageVolumeKey(c.name, c.version)
		if key != c.key {
			t.Errorf("ImageVolumeKey(%s, %d) = %s, want %s", c.name, c.version, key, c.key)
		}
		name, version, ok := ParseImageVolumeKey(key)
		if !ok || name != c.name || version != max(c.version, 1) {
			t.Errorf("ParseImageVolumeKey(%s) = %s, %d, %v", key, name, version, ok)
		}
	}
	if _, _, ok := ParseImageVolumeKey("checkpoints/abc"); ok {
		t.Error("a checkpoint's key parsed as an image's")
	}
}
