package main

import (
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

// sshFile is the size of the file copied each way.
const sshFile = 256 << 20

// sshGateway measures OpenSSH's ssh and scp through dend's SSH gateway
// beside den exec and den cp doing the same, alternated in one run: `true`
// round trips, and a 256 MiB file each way.
func (b *bench) sshGateway() error {
	name := "sshbench"
	if _, err := b.d.c.CreateSandbox(b.ctx, api.CreateSandboxRequest{Name: name, Image: "busybox", Memory: "256M", Disk: "2G"}); err != nil {
		return err
	}
	defer b.d.c.RemoveSandbox(b.ctx, name, true)
	dir := filepath.Join(b.work, "ssh")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	key := filepath.Join(dir, "key")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key).CombinedOutput(); err != nil {
		return fmt.Errorf("ssh-keygen: %w: %s", err, out)
	}
	tok, err := b.d.c.CreateToken(b.ctx, api.CreateTokenRequest{Name: "bench-ssh", Scope: "admin"})
	if err != nil {
		return err
	}
	tc, err := client.New(client.WithHost("http://"+b.d.listen, tok.Token))
	if err != nil {
		return err
	}
	pub, err := os.ReadFile(key + ".pub")
	if err != nil {
		return err
	}
	if _, err := tc.AddSSHKey(b.ctx, "bench", string(pub)); err != nil {
		return err
	}
	host, port, _ := net.SplitHostPort(b.d.sshAddr)
	opts := []string{"-F", "/dev/null", "-i", key, "-o", "IdentitiesOnly=yes", "-o", "IdentityAgent=none",
		"-o", "StrictHostKeyChecking=accept-new", "-o", "UserKnownHostsFile=" + filepath.Join(dir, "known_hosts"),
		"-o", "BatchMode=yes", "-o", "LogLevel=ERROR"}
	target := name + "@" + host
	sock := filepath.Join(b.work, "den.sock")
	run := func(prog string, args ...string) func() error {
		return func() error {
			if out, err := exec.Command(prog, args...).CombinedOutput(); err != nil {
				return fmt.Errorf("%s %s: %w: %s", filepath.Base(prog), strings.Join(args, " "), err, out)
			}
			return nil
		}
	}
	den := filepath.Join(b.bin, "den")

	// A connection kept open (ControlMaster), as an editor or a script
	// that runs many commands does: each command is then a new session
	// on it, with no process start of ssh's own handshake.
	cm := append(slices.Clone(opts), "-o", "ControlPath="+filepath.Join(dir, "cm"), "-p", port)
	if err := run("ssh", append(slices.Clone(cm), "-o", "ControlMaster=yes", "-N", "-f", target)...)(); err != nil {
		return err
	}
	defer exec.Command("ssh", append(slices.Clone(cm), "-O", "exit", target)...).Run()

	src := filepath.Join(dir, "blob")
	if err := writeRandom(src, sshFile); err != nil {
		return err
	}
	paths := []struct {
		label string
		f     func() error
	}{
		{"ssh true", run("ssh", append(opts, "-p", port, target, "true")...)},
		{"den exec true", run(den, "--socket", sock, "exec", name, "--", "true")},
		{"ssh true, open connection", run("ssh", append(slices.Clone(cm), target, "true")...)},
		{"scp up", run("scp", append(opts, "-P", port, src, target+":/root/up-scp")...)},
		{"den cp up", run(den, "--socket", sock, "cp", src, name+":/root/up-cp")},
		{"scp down", run("scp", append(opts, "-P", port, target+":/root/up-scp", filepath.Join(dir, "down-scp"))...)},
		{"den cp down", run(den, "--socket", sock, "cp", name+":/root/up-cp", filepath.Join(dir, "down-cp"))},
	}
	// Warm every path once, then alternate so drift hits them alike.
	for _, p := range paths {
		if err := p.f(); err != nil {
			return err
		}
	}
	got := map[string]samples{}
	rounds := map[string]int{"ssh true": b.n, "den exec true": b.n, "ssh true, open connection": b.n}
	big := min(b.nBig, 5)
	for i := range b.n {
		for _, p := range paths {
			if n, ok := rounds[p.label]; (ok && i >= n) || (!ok && i >= big) {
				continue
			}
			d, err := timed(p.f)
			if err != nil {
				return err
			}
			got[p.label] = append(got[p.label], d)
		}
	}
	for _, f := range []string{"down-scp", "down-cp"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() != sshFile {
			return fmt.Errorf("%s came back wrong: %v", f, err)
		}
	}
	b.add(section{title: "SSH gateway: OpenSSH beside den's own paths", rows: []row{
		{op: "ssh SANDBOX true (raw: den exec)", den: got["ssh true"], raw: got["den exec true"], goal: "≤ 1.5× den exec", note: ratio(got["ssh true"], got["den exec true"])},
		{op: "ssh SANDBOX true on an open connection (raw: den exec)", den: got["ssh true, open connection"], raw: got["den exec true"],
			note: joinNotes(ratio(got["ssh true, open connection"], got["den exec true"]), "ControlMaster")},
		{op: "scp 256 MiB up (raw: den cp)", den: got["scp up"], raw: got["den cp up"], goal: "≤ 1.5× den cp", note: joinNotes(ratio(got["scp up"], got["den cp up"]), mibps(sshFile, got["scp up"]))},
		{op: "scp 256 MiB down (raw: den cp)", den: got["scp down"], raw: got["den cp down"], goal: "≤ 1.5× den cp", note: joinNotes(ratio(got["scp down"], got["den cp down"]), mibps(sshFile, got["scp down"]))},
	}})
	return nil
}

// mibps is the throughput of moving size bytes in the median time.
func mibps(size int64, s samples) string {
	p := s.pct(0.5)
	if p == 0 {
		return ""
	}
	return fmt.Sprintf("%.0f MiB/s by scp", float64(size)/(1<<20)/p.Seconds())
}

// writeRandom writes size random bytes to path.
func writeRandom(path string, size int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.CopyN(f, rand.Reader, size); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
