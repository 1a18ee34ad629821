package client

import (
	"net/http"
	"net/url"
	"testing"
)

// Every request that changes something is put in words of its own: a
// user who lost the connection reads what was being done and how to
// check it, never a URL.
func TestDescribe(t *testing.T) {
	for _, tt := range []struct {
		method, path string
		query        url.Values
		doing, noun  string
		check        string
	}{
		{"POST", "/v1/sandboxes", nil, "creating a sandbox", "the create", "den ls"},
		{"DELETE", "/v1/sandboxes/s4", nil, "removing sandbox s4", "the removal", "den inspect s4"},
		{"POST", "/v1/sandboxes/s4/restore", nil, "restoring sandbox s4", "the restore", "den inspect s4"},
		{"POST", "/v1/sandboxes/s4/exec", nil, "starting a command in sandbox s4", "the command", "den runs s4"},
		{"PATCH", "/v1/sandboxes/s4/limits", nil, "changing the limits of sandbox s4", "the change", "den inspect s4"},
		{"DELETE", "/v1/sandboxes/s4/checkpoints/base", nil, "removing checkpoint base of sandbox s4", "the removal", "den checkpoints s4"},
		{"PUT", "/v1/sandboxes/s4/files/content", url.Values{"path": {"/root/a b"}}, "writing /root/a b in sandbox s4", "the write", "den exec s4 -- ls -la '/root/a b'"},
		{"PUT", "/v1/sandboxes/s4/files/archive", url.Values{"path": {"/srv"}}, "copying files into /srv in sandbox s4", "the copy", "den exec s4 -- ls -la /srv"},
		{"DELETE", "/v1/sandboxes/s4/files", url.Values{"path": {"/tmp/x"}}, "removing /tmp/x in sandbox s4", "the removal", "den exec s4 -- ls -la /tmp"},
		{"POST", "/v1/sandboxes/s4/runs/r1/signal", nil, "signalling run r1 in sandbox s4", "the signal", "den runs s4"},
		{"PUT", "/v1/sandboxes/s4/ports/8080", nil, "exposing port 8080 of sandbox s4", "the change", "den port ls s4"},
		{"DELETE", "/v1/sandboxes/s4/ports/8080/url", nil, "revoking the links to port 8080 of sandbox s4", "the revocation", "den port ls s4"},
		{"POST", "/v1/images/build", nil, "building an image", "the build", "den image ls"},
		{"DELETE", "/v1/images/busybox", nil, "removing image busybox", "the removal", "den image ls"},
		{"POST", "/v1/tokens", nil, "creating a token", "the token", "den token ls"},
		{"PUT", "/v1/secrets/db", nil, "setting secret db", "the change", "den secret ls"},
	} {
		op := describe(tt.method, tt.path, tt.query)
		if op.doing != tt.doing || op.noun != tt.noun || op.check != tt.check {
			t.Errorf("describe(%s %s) = %q, %q, %q; want %q, %q, %q", tt.method, tt.path, op.doing, op.noun, op.check, tt.doing, tt.noun, tt.check)
		}
	}
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		if op := describe(m, "/v1/sandboxes/s4/whatever/else", nil); op.sandbox != "s4" || op.doing == "" {
			t.Errorf("describe(%s of an unknown sandbox path) = %+v", m, op)
		}
	}
}
