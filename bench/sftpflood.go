package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

// The SFTP flood: one SSH connection, one SFTP channel, 12 files, each
// sent 60 MiB of writes that never start at offset 0, so that every one
// of them is ahead of its place. dend's resident memory is read before,
// at its highest during, and after the connection ends, beside the same
// 12 × 60 MiB written in order over the same kind of connection.
const (
	floodFiles = 12
	floodBytes = 60 << 20
	floodChunk = 32 << 10 // what OpenSSH's sftp and Go's client send a write
)

func (b *bench) sftpFlood() error {
	name := "sftpflood"
	if _, err := b.d.c.CreateSandbox(b.ctx, api.CreateSandboxRequest{Name: name, Image: "busybox", Memory: "256M", Disk: "2G"}); err != nil {
		return err
	}
	defer b.d.c.RemoveSandbox(b.ctx, name, true)
	signer, err := b.benchKey("sftpflood")
	if err != nil {
		return err
	}
	pid := b.d.cmd.Process.Pid
	rss := func() int64 { return statusKB(fmt.Sprintf("/proc/%d/status", pid), "VmRSS:") }

	// Every figure is dend's RSS, beside what it was before any SFTP.
	base := rss()
	lines := []string{fmt.Sprintf("dend before any SFTP: %s", mib(base))}
	for _, run := range []struct {
		label   string
		inOrder bool
	}{{"in order (unflooded)", true}, {"flood: every write ahead of its place", false}} {
		before := rss()
		peak, sent, refused, err := b.floodOnce(name, signer, run.inOrder, rss)
		if err != nil {
			return fmt.Errorf("%s: %w", run.label, err)
		}
		// After the connection ended: what the runtime gives back on its
		// own, with no call of dend's to hurry it.
		var after []string
		start := time.Now()
		for _, at := range []time.Duration{time.Second, 5 * time.Second, 15 * time.Second, 30 * time.Second} {
			time.Sleep(time.Until(start.Add(at)))
			after = append(after, fmt.Sprintf("%s %s", at, mib(rss())))
		}
		lines = append(lines, fmt.Sprintf("%s: %s before; at most %s during (%+.1f MiB over before any SFTP); after the connection ended: %s; %d MiB sent, %d writes refused",
			run.label, mib(before), mib(peak), float64(peak-base)/(1<<20), strings.Join(after, ", "), sent>>20, refused))
		if _, err := b.exec(name, "sh", "-c", "rm -f /root/flood*"); err != nil {
			return err
		}
	}
	b.add(section{title: fmt.Sprintf("SFTP flood: one channel, %d files, %d MiB of writes each (dend's RSS; sampled every 20 ms)", floodFiles, floodBytes>>20), lines: lines})
	return nil
}

// floodOnce sends the 12 files over one new connection and channel, and
// returns dend's highest RSS meanwhile, the bytes sent and the writes
// refused.
func (b *bench) floodOnce(name string, signer ssh.Signer, inOrder bool, rss func() int64) (peak, sent, refused int64, err error) {
	c, err := ssh.Dial("tcp", b.d.sshAddr, &ssh.ClientConfig{
		User: name, Auth: []ssh.AuthMethod{ssh.PublicKeys(signer)},
		HostKeyCallback: ssh.InsecureIgnoreHostKey(), // the bench's own dend on loopback
	})
	if err != nil {
		return 0, 0, 0, err
	}
	defer c.Close()
	sc, err := sftp.NewClient(c)
	if err != nil {
		return 0, 0, 0, err
	}
	defer sc.Close()

	var top atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			if v := rss(); v > top.Load() {
				top.Store(v)
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	var wg sync.WaitGroup
	var nSent, nRefused atomic.Int64
	errs := make(chan error, floodFiles)
	block := make([]byte, floodChunk)
	for i := range floodFiles {
		wg.Go(func() {
			f, err := sc.OpenFile(fmt.Sprintf("/root/flood%d", i), os.O_WRONLY|os.O_CREATE|os.O_TRUNC)
			if err != nil {
				errs <- err
				return
			}
			// Ahead: from the second chunk on, the first never sent.
			first := int64(floodChunk)
			if inOrder {
				first = 0
			}
			// 16 writes in flight per file, as a pipelining client has.
			sem := make(chan struct{}, 16)
			var fw sync.WaitGroup
			for off := first; off < first+floodBytes; off += floodChunk {
				sem <- struct{}{}
				fw.Go(func() {
					defer func() { <-sem }()
					if _, err := f.WriteAt(block, off); err != nil {
						nRefused.Add(1)
					}
					nSent.Add(floodChunk)
				})
			}
			fw.Wait()
			err = f.Close()
			if inOrder && err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	sc.Close()
	c.Close()
	close(stop)
	<-sampled
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	if inOrder && nRefused.Load() > 0 {
		all = append(all, fmt.Errorf("%d writes in order refused", nRefused.Load()))
	}
	return top.Load(), nSent.Load(), nRefused.Load(), errors.Join(all...)
}

// benchKey makes a key, registers it for a new admin token and returns it.
func (b *bench) benchKey(label string) (ssh.Signer, error) {
	dir := filepath.Join(b.work, label)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	key := filepath.Join(dir, "key")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("ssh-keygen: %w: %s", err, out)
	}
	tok, err := b.d.c.CreateToken(b.ctx, api.CreateTokenRequest{Name: "bench-" + label, Scope: "admin"})
	if err != nil {
		return nil, err
	}
	tc, err := client.New(client.WithHost("http://"+b.d.listen, tok.Token))
	if err != nil {
		return nil, err
	}
	pub, err := os.ReadFile(key + ".pub")
	if err != nil {
		return nil, err
	}
	if _, err := tc.AddSSHKey(b.ctx, label, string(pub)); err != nil {
		return nil, err
	}
	pem, err := os.ReadFile(key)
	if err != nil {
		return nil, err
	}
	return ssh.ParsePrivateKey(pem)
}
