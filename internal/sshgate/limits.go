package sshgate

import (
	"fmt"
	"sync"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"

	"github.com/den-dev/den/internal/errdefs"
)

// Limits bound what one key's connections may hold in dend. Each refusal
// tells the client which limit it met and the dend flag that sets it.
type Limits struct {
	// ConnsPerKey is how many connections one key may have open at once
	// through this node's gateway; one more is refused at login.
	ConnsPerKey int
	// ChannelsPerConn is how many channels (sessions, sftp, -L forwards)
	// one connection may have open at once; one more is refused.
	ChannelsPerConn int
	// SFTPHandles is how many files and directories the SFTP sessions of
	// one connection may have open at once; one more open is refused.
	SFTPHandles int
	// SFTPBuffer is how many bytes of writes that arrived ahead of their
	// place in a file the SFTP sessions of one connection may hold
	// together; a write past it is refused, and that file not written.
	SFTPBuffer int64
	// SFTPInFlight is how many bytes of requests read and not yet
	// answered the SFTP sessions of one connection may hold together;
	// past it dend reads no more of them until answers go (pacing, not a
	// refusal). Each session has at most maxInFlight unanswered besides.
	SFTPInFlight int64
}

// DefaultLimits are the limits of a Config that sets none. A client
// writing files in order (scp, sftp, rclone, sshfs) holds a few hundred
// KiB ahead, and has 2 MiB in flight a transfer; OpenSSH's sshd allows 10
// sessions a connection, and a browser opens 6 connections a host through
// -L. What one connection may make dend hold is then about SFTPBuffer
// for writes ahead, as much again for what files being read keep behind,
// SFTPInFlight, 512 KiB for each handle open, and 2 MiB for each channel
// (what the client sent that dend has not read yet: x/crypto's window):
// 112 MiB with these, 900 MiB for one key's ConnsPerKey connections.
func DefaultLimits() Limits {
	return Limits{ConnsPerKey: 8, ChannelsPerConn: 16, SFTPHandles: 64, SFTPBuffer: 16 << 20, SFTPInFlight: 16 << 20}
}

// Validate names the first limit that is not positive.
func (l Limits) Validate() error {
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"ConnsPerKey", int64(l.ConnsPerKey)}, {"ChannelsPerConn", int64(l.ChannelsPerConn)},
		{"SFTPHandles", int64(l.SFTPHandles)}, {"SFTPBuffer", l.SFTPBuffer}, {"SFTPInFlight", l.SFTPInFlight},
	} {
		if f.v <= 0 {
			return errdefs.Invalid("sshgate: limit %s must be positive, not %d", f.name, f.v)
		}
	}
	return nil
}

// withDefaults fills the limits left zero.
func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.ConnsPerKey == 0 {
		l.ConnsPerKey = d.ConnsPerKey
	}
	if l.ChannelsPerConn == 0 {
		l.ChannelsPerConn = d.ChannelsPerConn
	}
	if l.SFTPHandles == 0 {
		l.SFTPHandles = d.SFTPHandles
	}
	if l.SFTPBuffer == 0 {
		l.SFTPBuffer = d.SFTPBuffer
	}
	if l.SFTPInFlight == 0 {
		l.SFTPInFlight = d.SFTPInFlight
	}
	return l
}

// keyConns counts the connections open per key, by fingerprint.
type keyConns struct {
	max int

	mu sync.Mutex
	n  map[string]int
}

// take counts one more connection for key; false when key has max open.
func (k *keyConns) take(key string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.n[key] >= k.max {
		return false
	}
	k.n[key]++
	return true
}

func (k *keyConns) give(key string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.n[key]--; k.n[key] <= 0 {
		delete(k.n, key)
	}
}

// tooManyConns is the banner a login over the limit gets.
func tooManyConns(max int) error {
	return &ssh.BannerError{
		Err: errRefused,
		Message: fmt.Sprintf("den: this key has %d connections open, the most den allows (dend --ssh-conns-per-key); "+
			"close one, or share one with ssh's ControlMaster\n", max),
	}
}

// channelCount counts a connection's open channels.
type channelCount struct {
	max int

	mu sync.Mutex
	n  int
}

// take counts one more channel; false when max are open.
func (c *channelCount) take() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n >= c.max {
		return false
	}
	c.n++
	return true
}

func (c *channelCount) give() {
	c.mu.Lock()
	c.n--
	c.mu.Unlock()
}

// reject refuses nch for being one channel too many.
func (c *channelCount) reject(nch ssh.NewChannel) {
	_ = nch.Reject(ssh.ResourceShortage, fmt.Sprintf("den: this connection has %d channels open, the most den allows "+
		"(dend --ssh-channels); close one, or open another connection", c.max))
}

// sftpBudget is what the SFTP sessions of one connection may hold
// together: open handles, bytes of writes ahead of their place, and
// requests in flight.
type sftpBudget struct {
	maxHandles int
	maxBytes   int64
	flight     *flight
	// reads is the room the files being read keep what they read in,
	// for reads that come out of order: as much as writes ahead get.
	reads *sftpBudget

	// mu guards the counts.
	mu      sync.Mutex
	handles int
	bytes   int64
	peak    int64 // the most bytes held at once
}

func newSFTPBudget(l Limits) *sftpBudget {
	return &sftpBudget{maxHandles: l.SFTPHandles, maxBytes: l.SFTPBuffer, flight: newFlight(l.SFTPInFlight),
		reads: &sftpBudget{maxBytes: l.SFTPBuffer}}
}

// open takes a handle; it returns the func that gives it back (once,
// however often it is called), or an error for the client when none is
// left.
func (b *sftpBudget) open() (func(), error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.handles >= b.maxHandles {
		return nil, &fxError{
			err: errdefs.Quota("den's SFTP has %d files and directories open on this connection, the most it allows "+
				"(dend --ssh-sftp-handles); close one first", b.maxHandles),
			code: sftp.ErrSSHFxFailure,
		}
	}
	b.handles++
	return sync.OnceFunc(func() {
		b.mu.Lock()
		b.handles--
		b.mu.Unlock()
	}), nil
}

// hold takes n bytes of the buffer; false when they do not fit.
func (b *sftpBudget) hold(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.bytes+n > b.maxBytes {
		return false
	}
	b.bytes += n
	b.peak = max(b.peak, b.bytes)
	return true
}

// release gives n bytes of the buffer back.
func (b *sftpBudget) release(n int64) {
	b.mu.Lock()
	b.bytes -= n
	b.mu.Unlock()
}

// full is the error of a write that does not fit in the buffer.
func (b *sftpBudget) full() error {
	return errdefs.Quota("writes ahead of the end of what was written take more than the %d MiB den's SFTP holds "+
		"per connection (dend --ssh-sftp-buffer), so the file was not written: write each file from its start to its end, "+
		"as scp and sftp put do", b.maxBytes>>20)
}

// peakBytes is the most the buffer held at once.
func (b *sftpBudget) peakBytes() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.peak
}
