package sandbox

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/den-dev/den/internal/errdefs"
)

func TestValidateSetup(t *testing.T) {
	long := strings.Repeat("x", MaxSetupStepSize+1)
	for _, c := range []struct {
		name        string
		steps, keep []string
		want        string // "" when valid
	}{
		{"none", nil, nil, ""},
		{"fine", []string{"apt-get install -y git"}, []string{"/opt/data", "/var/lib/app"}, ""},
		{"empty step", []string{"  "}, nil, "setup step 1 is empty"},
		{"long step", []string{"true", long}, nil, "setup step 2 is"},
		{"relative", nil, []string{"data"}, "not absolute"},
		{"dot-dot", nil, []string{"/opt/../etc"}, `".." element`},
		{"not plain", nil, []string{"/opt//data/"}, "plain form"},
		{"root", nil, []string{"/"}, "carry the old system"},
		{"system", nil, []string{"/usr"}, "carry the old system"},
		{"proc", nil, []string{"/proc/1"}, "carry the old system"},
		{"den's secrets", nil, []string{"/run/secrets"}, "under /run"},
		{"run", nil, []string{"/run/app"}, "under /run"},
		{"passwd", nil, []string{"/opt/data", "/etc/passwd"}, "account files"},
		{"shadow", nil, []string{"/etc/shadow"}, "account files"},
		{"sudoers", nil, []string{"/etc/sudoers.d"}, "account files"},
		{"other /etc", nil, []string{"/etc/nginx"}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := ValidateSetup(c.steps, c.keep)
			if c.want == "" {
				if err != nil {
					t.Fatalf("ValidateSetup = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, errdefs.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("ValidateSetup = %v, want invalid saying %q", err, c.want)
			}
		})
	}
}

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
