package exposing

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/expose"
	"github.com/den-dev/den/internal/guest"
	"github.com/den-dev/den/internal/sandbox"
)

// portDialer is a Guest that reaches ports on the sandbox's loopback.
// den-init has done so since the SSH gateway came; an older one,
// restored from an older image, does not.
type portDialer interface {
	DialPort(ctx context.Context, port uint16) (*guest.PortConn, error)
}

// DialPort opens a TCP connection to port inside the sandbox, whether or
// not it is exposed: for a door whose caller may run anything in the
// sandbox already (`ssh -L` through the SSH gateway), to whom reaching a
// port gives nothing more. A server listening on the sandbox's loopback
// only is reached too. A sleeping sandbox is woken, and the call counts
// as use.
func (p *Ports) DialPort(ctx context.Context, ref string, port uint16) (io.ReadWriteCloser, error) {
	if err := expose.Validate(port); err != nil {
		return nil, err
	}
	var conn io.ReadWriteCloser
	err := p.svc.WithRunning(ctx, ref, fmt.Sprintf("reach port %d of", port), func(sb *sandbox.Sandbox) error {
		var err error
		conn, err = p.dial(ctx, sb, port)
		return err
	})
	if err != nil {
		return nil, err
	}
	return conn, nil
}

// dial reaches port of running sb, whose lifecycle lock the caller holds
// shared: through den-init, or at sb's private address for an older one.
func (p *Ports) dial(ctx context.Context, sb *sandbox.Sandbox, port uint16) (io.ReadWriteCloser, error) {
	if d, ok := p.svc.GuestFor(sb).(portDialer); ok {
		conn, err := d.DialPort(ctx, port)
		if err == nil {
			return conn, nil
		}
		if !errors.Is(err, errdefs.ErrNotFound) {
			return nil, fmt.Errorf("reaching port %d of sandbox %q: %w", port, sb.Name, err)
		}
	}
	// An older den-init: the sandbox's private address reaches servers
	// that listen on every address.
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", netip.AddrPortFrom(p.svc.GuestAddr(sb), port).String())
	if err != nil {
		return nil, errdefs.Unavailable("reaching port %d of sandbox %q: %v", port, sb.Name, err)
	}
	return conn, nil
}
