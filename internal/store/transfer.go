package store

import (
	"fmt"
	"strings"

	"github.com/den-dev/den/internal/audit"
	"github.com/den-dev/den/internal/auth"
	"github.com/den-dev/den/internal/idempotency"
	"github.com/den-dev/den/internal/quota"
	"github.com/den-dev/den/internal/sandbox"
	"github.com/den-dev/den/internal/secret"
)

// Records is every record a store holds, as one store reads them out
// and another takes them in: moving a single host's SQLite store into a
// fleet's PostgreSQL (dend --import-sqlite). Each list is in the order
// the records were written, so the taker keeps their order.
type Records struct {
	Sandboxes   []*sandbox.Sandbox // destroyed ones too: they keep their history
	Events      []sandbox.Event
	Runs        []*sandbox.Run
	Checkpoints []*sandbox.Checkpoint
	Images      []*sandbox.Image // every version, each image's oldest first
	Owners      []*quota.Owner
	Tokens      []*auth.Token
	SSHKeys     []*auth.SSHKey
	Audit       []*audit.Entry
	Secrets     []*secret.Record
	Requests    []*idempotency.Record
}

// Counts says how many records of each kind r holds, by kind, in the
// order Summary lists them.
func (r *Records) Counts() []Count {
	destroyed := 0
	for _, sb := range r.Sandboxes {
		if sb.State == sandbox.StateDestroyed {
			destroyed++
		}
	}
	return []Count{
		{"sandboxes", len(r.Sandboxes)}, {"destroyed sandboxes", destroyed}, {"events", len(r.Events)},
		{"runs", len(r.Runs)}, {"checkpoints", len(r.Checkpoints)}, {"images", len(r.Images)},
		{"owners", len(r.Owners)}, {"tokens", len(r.Tokens)}, {"SSH keys", len(r.SSHKeys)}, {"audit entries", len(r.Audit)},
		{"secrets", len(r.Secrets)}, {"idempotency records", len(r.Requests)},
	}
}

// Count is how many records of a kind.
type Count struct {
	Kind string `json:"kind"`
	N    int    `json:"n"`
}

// Summary is counts in words: "3 sandboxes (1 destroyed), 40 events, ...".
func Summary(counts []Count) string {
	var parts []string
	for i := 0; i < len(counts); i++ {
		c := counts[i]
		s := fmt.Sprintf("%d %s", c.N, c.Kind)
		if c.Kind == "sandboxes" && i+1 < len(counts) && counts[i+1].Kind == "destroyed sandboxes" {
			s += fmt.Sprintf(" (%d destroyed)", counts[i+1].N)
			i++
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}
