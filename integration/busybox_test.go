package integration

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

// The busybox image's network and user tools work, or fail saying why,
// never with a crash: wget by address and by name, nslookup through den's
// resolver, id. wget -T, which Debian's static busybox crashes on, works
// when run as a command (the image's /bin/wget runs it under timeout);
// a shell runs busybox's own applet, which still crashes on it (see the
// README). ping needs raw sockets, which gVisor's network does not give a
// sandbox: it says so.
func TestBusyboxTools(t *testing.T) {
	stub := startStubDNS(t, nil, "127.0.0.1:0")
	d := startDend(t, "--dns-upstream", stub.addr.String())
	d.create("bb")
	if _, err := d.c.SetNetwork(ctxT(t, 30*time.Second), "bb", api.NetworkPolicy{Mode: "allow", Allow: []string{"allowed.test"}}); err != nil {
		t.Fatal(err)
	}
	d.mustSh("bb", "mkdir -p /www && echo hello > /www/index.html && httpd -p 127.0.0.1:8080 -h /www")

	for _, c := range []struct{ script, want string }{
		{"wget -q -O- http://127.0.0.1:8080/", "hello"},
		{"wget -q -O- http://localhost:8080/", "hello"},
		{"nslookup allowed.test", allowedAddr},
		{"id", "uid=0(root) gid=0(root)"},
		{"id nobody", "uid=65534(nobody)"},
		{"whoami", "root"},
	} {
		out, errOut, code := d.sh("bb", c.script)
		if code != 0 || !strings.Contains(out, c.want) {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want %q", c.script, code, out, errOut, c.want)
		}
	}
	for _, c := range []struct{ script, want string }{
		{"wget -q -O- http://not-allowed.test/", "bad address"},
		{"nslookup not-allowed.test", "can't find"},
		{"ping -c 1 127.0.0.1", "permission denied"},
	} {
		out, errOut, code := d.sh("bb", c.script)
		if code == 0 || code >= 128 || !strings.Contains(out+errOut, c.want) {
			t.Errorf("%s: exit %d, output %q; want a failure (not a crash) saying %q", c.script, code, out+errOut, c.want)
		}
	}

	for _, c := range []struct {
		argv []string
		code int
		want string
	}{
		{[]string{"wget", "-T", "5", "-q", "-O-", "http://localhost:8080/"}, 0, "hello"},
		{[]string{"wget", "--timeout=5", "-q", "-O-", "http://127.0.0.1:8080/index.html"}, 0, "hello"},
		{[]string{"wget", "-T1", "-q", "-O-", "http://127.0.0.1:1/"}, 1, "refused"},
	} {
		var out, errb bytes.Buffer
		run, err := d.c.Exec(ctxT(t, time.Minute), "bb", api.ExecRequest{Argv: c.argv}, client.ExecIO{Stdout: &out, Stderr: &errb})
		if err != nil {
			t.Fatal(err)
		}
		if run.ExitCode == nil || *run.ExitCode != c.code || !strings.Contains(out.String()+errb.String(), c.want) {
			t.Errorf("%v: exit %v (%s), output %q; want exit %d saying %q", c.argv, run.ExitCode, run.Status, out.String()+errb.String(), c.code, c.want)
		}
	}
}
