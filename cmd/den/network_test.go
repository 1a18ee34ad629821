package main

import (
	"strings"
	"testing"
)

// TestNetworkFlags: den network and create send the policy the flags say,
// --allow implying mode allow; without flags den network only reads.
func TestNetworkFlags(t *testing.T) {
	d := &sleepDend{}
	sock := d.start(t)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"network", "web", "--allow", "pypi.org:443", "--allow", "*.pythonhosted.org"},
			`PUT /v1/sandboxes/web/network {"mode":"allow","allow":["pypi.org:443","*.pythonhosted.org"]}`},
		{[]string{"network", "web", "--mode", "open"}, `PUT /v1/sandboxes/web/network {"mode":"open"}`},
		{[]string{"network", "web", "--mode", "none"}, `PUT /v1/sandboxes/web/network {"mode":"none"}`},
		{[]string{"network", "web"}, `GET /v1/sandboxes/web`},
		{[]string{"create", "agent", "--from", "web:base", "--allow", "198.51.100.0/24:5432"},
			`POST /v1/sandboxes {"name":"agent","from":"web:base","network":{"mode":"allow","allow":["198.51.100.0/24:5432"]}}`},
		{[]string{"create", "wide", "--from", "web:base", "--network", "open"},
			`POST /v1/sandboxes {"name":"wide","from":"web:base","network":{"mode":"open"}}`},
	} {
		code, stdout, stderr := runDen(t, sock, tt.args...)
		if code != 0 {
			t.Errorf("%v: %d %q %q", tt.args, code, stdout, stderr)
		}
		if tt.args[0] == "network" && !strings.HasPrefix(stdout, "mode   ") {
			t.Errorf("%v printed %q", tt.args, stdout)
		}
		if got := d.last(t); got != tt.want {
			t.Errorf("%v sent %s, want %s", tt.args, got, tt.want)
		}
	}
}
