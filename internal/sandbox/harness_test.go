package sandbox

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/den-dev/den/internal/errdefs"
)

func TestHarnessValidate(t *testing.T) {
	svc := func(name string, argv ...string) ServiceSpec { return ServiceSpec{Name: name, Argv: argv} }
	for _, tc := range []struct {
		name    string
		h       Harness
		wantErr string // "" for valid
	}{
		{"steps only", Harness{Steps: []string{"echo A >/opt/v"}}, ""},
		{"service and config path", Harness{Services: []ServiceSpec{svc("agent", "sleep", "1d")}, ConfigPaths: []string{"/opt/agent"}}, ""},
		{"empty", Harness{}, "the harness is empty"},
		{"empty step", Harness{Steps: []string{"true", "  "}}, "harness step 2 is empty"},
		{"NUL in step", Harness{Steps: []string{"a\x00b"}}, "NUL"},
		{"bad service name", Harness{Services: []ServiceSpec{svc("Agent!", "x")}}, "invalid service name"},
		{"service without command", Harness{Services: []ServiceSpec{svc("agent")}}, "service \"agent\""},
		{"bad restart policy", Harness{Services: []ServiceSpec{{Name: "a", Argv: []string{"x"}, Restart: "sometimes"}}}, "unknown restart policy"},
		{"service twice", Harness{Services: []ServiceSpec{svc("a", "x"), svc("a", "y")}}, "given twice"},
		{"relative config path", Harness{ConfigPaths: []string{"opt/agent"}}, "config path"},
		{"system config path", Harness{ConfigPaths: []string{"/etc"}}, "would carry the old system"},
		{"config path under /run", Harness{ConfigPaths: []string{"/run/agent"}}, "under /run"},
		{"account file", Harness{ConfigPaths: []string{"/etc/passwd"}}, "account files"},
		{"unclean config path", Harness{ConfigPaths: []string{"/opt//agent"}}, "not in its plain form"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.h.Validate()
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Validate() = %v, want an error containing %q", err, tc.wantErr)
			}
			if !errors.Is(err, errdefs.ErrInvalid) {
				t.Errorf("Validate() = %v, want class invalid (a 400)", err)
			}
		})
	}
}

// A valid harness's services get their default policy, as the
// sandbox's own do.
func TestHarnessValidateFillsRestart(t *testing.T) {
	h := Harness{Services: []ServiceSpec{{Name: "a", Argv: []string{"x"}}}}
	if err := h.Validate(); err != nil {
		t.Fatal(err)
	}
	if h.Services[0].Restart != "always" {
		t.Errorf("restart = %q, want always", h.Services[0].Restart)
	}
}

func TestHarnessInSpec(t *testing.T) {
	s := Spec{Keep: []string{"/opt/data"}, Services: []ServiceSpec{{Name: "db"}},
		Harness: &Harness{Services: []ServiceSpec{{Name: "agent"}}, ConfigPaths: []string{"/etc/agent", "/root/.agent"}}}
	if got, want := s.KeptPaths(), []string{"/etc/agent", "/home", "/opt/data", "/root", "/srv", "/work"}; !slices.Equal(got, want) {
		t.Errorf("KeptPaths() = %q, want %q", got, want)
	}
	var names []string
	for _, sp := range s.AllServices() {
		names = append(names, sp.Name)
	}
	if want := []string{"db", "agent"}; !slices.Equal(names, want) {
		t.Errorf("AllServices() = %q, want %q (the sandbox's, then the harness's)", names, want)
	}
	sb := &Sandbox{Name: "web", Spec: s}
	if err := sb.CheckHarnessServices(&Harness{Services: []ServiceSpec{{Name: "db"}}}); !errors.Is(err, errdefs.ErrConflict) {
		t.Errorf("a harness service named as the sandbox's own = %v, want a conflict", err)
	}
}

// A clone shares nothing a later change could reach through.
func TestHarnessClone(t *testing.T) {
	h := &Harness{Steps: []string{"a"}, Services: []ServiceSpec{{Name: "s", Argv: []string{"x"}, Env: map[string]string{"K": "V"}}}}
	c := h.Clone()
	c.Steps[0], c.Services[0].Argv[0], c.Services[0].Env["K"] = "b", "y", "W"
	if h.Steps[0] != "a" || h.Services[0].Argv[0] != "x" || h.Services[0].Env["K"] != "V" {
		t.Errorf("changing a clone changed the original: %+v", h)
	}
	if (*Harness)(nil).Clone() != nil {
		t.Error("the clone of no harness is one")
	}
}
