package integration

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// vscodeRemoteSSH does to sandbox, through r's gateway, what VS Code's
// Remote-SSH extension does to a host it connects to: it runs its
// install script with bash on stdin (`ssh -T HOST bash`), which looks at
// the platform (uname, glibc and libstdc++ versions), makes its
// directory under a writable home, unpacks the server from a tar.gz
// piped in, starts it in the background listening on the sandbox's
// loopback, and prints the port; then it reaches that port through the
// SOCKS proxy of `ssh -D`, the dynamic forwarding it turns on by
// default. The server here is python's http.server standing in for VS
// Code's, which the test cannot download.
func vscodeRemoteSSH(t *testing.T, r *sshRig, sandbox string) {
	t.Helper()
	server := tarGz(t, map[string]string{
		"bin/code-server": "#!/bin/sh\ncd \"$(dirname \"$0\")/../www\" && exec python3 -m http.server --bind 127.0.0.1 \"$1\"\n",
		"www/index.html":  "vscode server stand-in\n",
	})
	script := `set -e
uname -rsv >/dev/null
echo "arch=$(uname -m)"
echo "home=$HOME"
ldd --version | head -1
ls /usr/lib/$(uname -m)-linux-gnu/libstdc++.so.6* >/dev/null && echo libstdc++=yes
for c in tar gzip ps sha256sum mktemp flock sed grep curl; do command -v $c >/dev/null || echo "missing $c"; done
SRV="$HOME/.vscode-server/bin/test-commit"
mkdir -p "$SRV"
printf '%s' "$1" | base64 -d | tar -xzf - -C "$SRV"
echo ok > "$HOME/.vscode-server/.probe"
nohup "$SRV/bin/code-server" 8111 > "$HOME/.vscode-server/server.log" 2>&1 &
for i in $(seq 50); do curl -fsS http://127.0.0.1:8111/ >/dev/null 2>&1 && break; sleep 0.1; done
echo "listeningOn==8111=="
`
	// VS Code writes the script to bash's stdin; the tarball rides as $1.
	stdin := "set -- " + shellQuote(b64(server)) + "\n" + script
	out, errs, code := r.ssh("alice", sandbox, stdin, "-T", "bash")
	if code != 0 {
		t.Fatalf("the install script, through ssh: exit %d\n%s\n%s", code, out, errs)
	}
	for _, want := range []string{"arch=x86_64", "home=/root", "GLIBC 2.", "libstdc++=yes", "listeningOn==8111=="} {
		if !strings.Contains(out, want) {
			t.Errorf("the install script's output lacks %q:\n%s%s", want, out, errs)
		}
	}
	if strings.Contains(out, "missing ") {
		t.Errorf("a command VS Code's script uses is missing:\n%s", out)
	}

	// ssh -D, and an HTTP request through its SOCKS5 proxy to the
	// server's port on the sandbox's loopback.
	socks := freeAddr(t)
	fwd := exec.Command("ssh", append(r.opts("alice"), "-N", "-o", "ExitOnForwardFailure=yes", "-D", socks, "-p", r.port, sandbox+"@127.0.0.1")...)
	fwd.Env = append(os.Environ(), r.sshEnv...)
	if err := fwd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { fwd.Process.Kill(); fwd.Wait() }()
	var body string
	waitFor(t, 30*time.Second, "the server through ssh -D", func() bool {
		b, err := getThroughSOCKS(socks, "127.0.0.1", 8111)
		body = b
		return err == nil
	})
	if body != "vscode server stand-in\n" {
		t.Errorf("through ssh -D: %q", body)
	}
}

// getThroughSOCKS asks GET / of host:port through the SOCKS5 proxy at
// proxy (RFC 1928, no authentication) and returns the body.
func getThroughSOCKS(proxy, host string, port int) (string, error) {
	c, err := net.DialTimeout("tcp", proxy, 5*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte{5, 1, 0}); err != nil {
		return "", err
	}
	hello := make([]byte, 2)
	if _, err := io.ReadFull(c, hello); err != nil || hello[0] != 5 || hello[1] != 0 {
		return "", fmt.Errorf("socks greeting: %v %v", hello, err)
	}
	ip := net.ParseIP(host).To4()
	req := append([]byte{5, 1, 0, 1}, ip...)
	req = binary.BigEndian.AppendUint16(req, uint16(port))
	if _, err := c.Write(req); err != nil {
		return "", err
	}
	rep := make([]byte, 10)
	if _, err := io.ReadFull(c, rep); err != nil || rep[1] != 0 {
		return "", fmt.Errorf("socks connect: %v %v", rep, err)
	}
	if _, err := fmt.Fprintf(c, "GET / HTTP/1.0\r\nHost: %s\r\n\r\n", net.JoinHostPort(host, strconv.Itoa(port))); err != nil {
		return "", err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return "", fmt.Errorf("status %d", resp.StatusCode)
	}
	return string(b), err
}

// tarGz makes a gzipped tar archive of files, with the host's tar.
func tarGz(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var gz bytes.Buffer
	cmd := exec.Command("gzip", "-c")
	cmd.Stdin = bytes.NewReader(tarOf(t, files))
	cmd.Stdout = &gz
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return gz.Bytes()
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
