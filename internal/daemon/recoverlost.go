package daemon

import (
	"context"
	"net/http"
	"net/url"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/internal/cluster"
	"github.com/den-dev/den/internal/sandbox"
)

// recoverLost brings back, on the nodes placement chooses, the sandboxes
// of lost node that this node just recorded in error (--recover-lost):
// each from its last upload, with its processes or cold. One that cannot
// come back stays in error, with the reason, for `den recover`.
func (f *fleetNode) recoverLost(ctx context.Context, lost string, sbs []*sandbox.Sandbox) {
	mode := f.cfg.RecoverLost
	f.log.Info("bringing back the sandboxes of a lost node", "node", lost, "sandboxes", len(sbs), "mode", mode)
	for _, sb := range sbs {
		if ctx.Err() != nil {
			return
		}
		want := cluster.Want{Portable: true, MemoryBytes: sb.Spec.MemoryBytes}
		if mode == sandbox.RecoverRollback {
			self := f.info(ctx) // a memory image restores on the same engine and CPU
			want.Like = &self
		}
		to, err := f.forwarder.Place(ctx, want)
		if err == nil {
			err = f.recoverOn(ctx, to, sb.ID, mode)
		}
		if to == "" {
			to = f.cfg.Node
		}
		if err != nil {
			f.log.Warn("bringing back a sandbox of a lost node; it waits in error for `den recover`",
				"sandbox", sb.Name, "node", lost, "to", to, "err", err)
			continue
		}
		f.log.Info("brought back a sandbox of a lost node", "sandbox", sb.Name, "from", lost, "to", to, "mode", mode)
	}
}

// recoverOn recovers sandbox id on node ("" is this one).
func (f *fleetNode) recoverOn(ctx context.Context, node, id, mode string) error {
	if node == "" {
		_, err := f.recovery.RecoverSandbox(ctx, id, sandbox.RecoverParams{Mode: mode})
		return err
	}
	return f.forwarder.Call(ctx, node, http.MethodPost, "/v1/sandboxes/"+url.PathEscape(id)+"/recover", api.RecoverRequest{Mode: mode}, nil)
}
