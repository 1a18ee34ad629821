package main

import (
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/den-dev/den/internal/daemon"
	"github.com/den-dev/den/internal/sandbox"
)

// sshFlags adds the flags of what one key's SSH connections may hold in
// dend; the returned func parses them into cfg once fs is parsed.
func sshFlags(fs *flag.FlagSet, cfg *daemon.Config) func() error {
	l := &cfg.SSHLimits
	ints := []struct {
		v          *int
		name, help string
		text       *string
	}{
		{v: &l.ConnsPerKey, name: "ssh-conns-per-key", help: "SSH connections one key may have open at once; one more is refused at login"},
		{v: &l.ChannelsPerConn, name: "ssh-channels", help: "channels (sessions, sftp, -L forwards) one SSH connection may have open at once; one more is refused"},
		{v: &l.SFTPHandles, name: "ssh-sftp-handles", help: "files and directories the SFTP sessions of one SSH connection may have open at once; one more open is refused"},
	}
	for i := range ints {
		ints[i].text = fs.String(ints[i].name, env("DEN_"+envName(ints[i].name), strconv.Itoa(*ints[i].v)), ints[i].help)
	}
	sizes := []struct {
		v          *int64
		name, help string
		text       *string
	}{
		{v: &l.SFTPBuffer, name: "ssh-sftp-buffer", help: "memory the SFTP sessions of one SSH connection may hold writes that arrived ahead of their place in a file in; a write past it is refused and its file not written"},
		{v: &l.SFTPInFlight, name: "ssh-sftp-inflight", help: "memory the SFTP sessions of one SSH connection may hold requests read and not yet answered in; past it dend reads no more of them until answers go (the client waits; nothing is refused)"},
	}
	for i := range sizes {
		sizes[i].text = fs.String(sizes[i].name, env("DEN_"+envName(sizes[i].name), fmt.Sprintf("%dM", *sizes[i].v>>20)), sizes[i].help)
	}
	return func() error {
		for _, f := range ints {
			n, err := strconv.Atoi(strings.TrimSpace(*f.text))
			if err != nil || n <= 0 {
				return fmt.Errorf("--%s: %q is not a positive number", f.name, *f.text)
			}
			*f.v = n
		}
		for _, f := range sizes {
			n, err := sandbox.ParseMemory(strings.TrimSpace(*f.text))
			if err != nil || n <= 0 {
				return fmt.Errorf("--%s: %q is not a size like 16M", f.name, *f.text)
			}
			*f.v = n
		}
		return nil
	}
}
