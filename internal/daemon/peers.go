package daemon

import (
	"cmp"
	"context"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/internal/cluster"
	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/fleet"
	"github.com/den-dev/den/internal/sandbox"
)

// peers is the fleet as the sandbox service moves sandboxes through it.
type peers struct {
	self  string
	nodes cluster.NodeLookup
	calls *cluster.Forwarder
	// info is this node's own report: a memory image restores only on
	// the same engine and CPU features.
	info func(ctx context.Context) cluster.Info
}

var (
	_ sandbox.Fleet = (*peers)(nil)
	_ fleet.Peers   = (*peers)(nil)
)

func (p *peers) CheckTarget(ctx context.Context, node string, warm bool) error {
	n, err := p.nodes.Node(ctx, node)
	if err != nil {
		return err
	}
	if n.State != cluster.StateActive || !n.Alive(time.Now()) {
		return errdefs.WithHint(errdefs.Conflict("node %s cannot take sandboxes: it is %s", node, describeNode(n)),
			"`den node ls` shows the nodes that are active")
	}
	if !warm {
		return nil
	}
	self := p.info(ctx)
	switch {
	case n.Info.RunscVersion != self.RunscVersion:
		return errdefs.WithHint(errdefs.Conflict("node %s runs runsc %s and this node %s: a memory image restores only on the same engine",
			node, n.Info.RunscVersion, self.RunscVersion), "move it with --cold to keep its files and not its processes")
	case !slices.Equal(n.Info.CPUFeatures, self.CPUFeatures):
		return errdefs.WithHint(errdefs.Conflict("node %s's CPU offers other features than this node's: a memory image restores only where the CPU offers what it was taken with", node),
			"move it with --cold to keep its files and not its processes")
	}
	return nil
}

func describeNode(n cluster.Node) string {
	if n.State == cluster.StateActive {
		return "past its lease (last heartbeat " + n.HeartbeatAt.Format(time.RFC3339) + ")"
	}
	return string(n.State)
}

func (p *peers) Adopt(ctx context.Context, node, id string, cold bool) error {
	var sb api.Sandbox
	err := p.calls.Call(ctx, node, http.MethodPost, "/v1/sandboxes/"+url.PathEscape(id)+"/adopt", api.AdoptRequest{Cold: cold}, &sb)
	if err != nil {
		return fmt.Errorf("handing over to node %s: %w", node, err)
	}
	return nil
}

func (p *peers) Lost(ctx context.Context, node string) bool { return p.calls.Lost(ctx, node) }

func (p *peers) PlaceAway(ctx context.Context, memoryBytes int64) (string, error) {
	self := p.info(ctx)
	return p.calls.Place(ctx, cluster.Want{Portable: true, Elsewhere: true, MemoryBytes: memoryBytes, Like: &self})
}

func (p *peers) RoomHere(ctx context.Context, memoryBytes int64) bool {
	n, err := p.nodes.Node(ctx, p.self)
	if err != nil || n.State != cluster.StateActive {
		return err != nil // the record unread: no reason to leave
	}
	info := p.info(ctx) // now, not at the last heartbeat
	return info.MemoryBytes <= 0 || info.CommittedMemoryBytes+memoryBytes <= info.MemoryBytes
}

func (p *peers) SendAhead(ctx context.Context, node string, h fleet.Handover, send func(io.Writer) error) error {
	pr, pw := io.Pipe()
	trailer := http.Header{cluster.HeaderStreamCRC: nil}
	go func() {
		sum := crc32.New(crc32.MakeTable(crc32.Castagnoli))
		err := send(io.MultiWriter(pw, sum))
		if err == nil {
			trailer.Set(cluster.HeaderStreamCRC, strconv.FormatUint(uint64(sum.Sum32()), 16))
		}
		pw.CloseWithError(err) // the trailer goes once the body ends
	}()
	q := url.Values{"checkpoint": {h.Checkpoint}, "base": {h.Base}}
	path := "/v1/sandboxes/" + url.PathEscape(h.Sandbox) + "/handover/" + url.PathEscape(h.Part) + "?" + q.Encode()
	err := p.calls.CallWith(ctx, node, http.MethodPut, path, pr, "application/octet-stream", trailer, nil)
	pr.CloseWithError(cmp.Or(err, io.ErrClosedPipe)) // a sender still writing stops
	if err != nil {
		return fmt.Errorf("sending the %s of checkpoint %s to node %s: %w", h.Part, h.Checkpoint, node, err)
	}
	return nil
}
