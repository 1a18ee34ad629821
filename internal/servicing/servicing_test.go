package servicing

import (
	"testing"

	"github.com/den-dev/den/internal/sandbox"
)

// A sandbox's services are its own, then its harness's; only the
// harness's are the harness's.
func TestFindAndHarnessService(t *testing.T) {
	sb := &sandbox.Sandbox{Name: "web", Spec: sandbox.Spec{Services: []sandbox.ServiceSpec{{Name: "db", Cwd: "/srv"}},
		Harness: &sandbox.Harness{Services: []sandbox.ServiceSpec{{Name: "agent"}}}}}
	if sp, ok := find(sb, "db"); !ok || sp.Cwd != "/srv" {
		t.Errorf("find(db) = %+v, %v; want the sandbox's own", sp, ok)
	}
	if _, ok := find(sb, "agent"); !ok {
		t.Error("find(agent) should find the harness's service")
	}
	if _, ok := find(sb, "ghost"); ok {
		t.Error("find(ghost) found a service the sandbox lacks")
	}
	if !harnessService(sb, "agent") || harnessService(sb, "db") {
		t.Error("harnessService should tell the harness's services from the sandbox's")
	}
	if harnessService(&sandbox.Sandbox{}, "agent") {
		t.Error("a sandbox without a harness has no harness service")
	}
}
