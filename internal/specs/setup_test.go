package specs

import (
	"errors"
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
