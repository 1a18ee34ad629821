package fleetapi

import (
	"context"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"strconv"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/internal/cluster"
	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/fleet"
	"github.com/den-dev/den/internal/httpapi/httpx"
	"github.com/den-dev/den/internal/sandbox"
)

// Fleet is what this node does with the other nodes of a fleet
// for a sandbox. *fleet.Node implements it.
type Fleet interface {
	// Move moves a sandbox to another node of the fleet; Adopt takes one
	// over from node from, which hands it over.
	Move(ctx context.Context, ref string, p fleet.MoveParams) (*sandbox.Sandbox, error)
	Adopt(ctx context.Context, id, from string, cold bool) (*sandbox.Sandbox, error)
	// ReceiveAhead keeps part of the checkpoint of a sandbox node from
	// hands over to this one.
	ReceiveAhead(ctx context.Context, from string, h fleet.Handover, r io.Reader, whole func() error) error
	// Rehome hands a hibernated sandbox about to wake to another node
	// when this one has no room, and says which ("" when it stays).
	Rehome(ctx context.Context, ref string) (string, error)
	// LostNodeHint says what brings back sb, on a node declared lost.
	LostNodeHint(ctx context.Context, sb *sandbox.Sandbox) string
}

// errNoFleet is the answer to a move on a dend that is not a node of a
// fleet.
var errNoFleet = errdefs.WithHint(errdefs.Conflict("this dend is not part of a fleet: there is no other node to move to"),
	"run several dends on one PostgreSQL database (dend --store postgres://...)")

// Move moves a sandbox to another node of the fleet.
func (s *Handlers) Move(w http.ResponseWriter, r *http.Request) error {
	var req api.MoveSandboxRequest
	if err := httpx.DecodeJSON(w, r, &req, s.maxJSONBytes); err != nil {
		return err
	}
	if s.fleet == nil {
		return errNoFleet
	}
	sb, err := s.fleet.Move(r.Context(), r.PathValue("name"), fleet.MoveParams{To: req.To, Cold: req.Cold})
	if err != nil {
		return err
	}
	return httpx.WriteJSON(w, http.StatusOK, s.toSandbox(sb))
}

// Adopt takes over a sandbox the node it is on hands over: only
// the nodes of the fleet call it, with the fleet's key.
func (s *Handlers) Adopt(w http.ResponseWriter, r *http.Request) error {
	if !httpx.InfoOf(r).FromNode {
		return errdefs.WithHint(errdefs.NotFound("no such route for callers outside the fleet"),
			"`den move NAME --to NODE` moves a sandbox")
	}
	var req api.AdoptRequest
	if err := httpx.DecodeJSON(w, r, &req, s.maxJSONBytes); err != nil {
		return err
	}
	if s.fleet == nil {
		return errNoFleet
	}
	sb, err := s.fleet.Adopt(r.Context(), r.PathValue("name"), r.Header.Get(cluster.HeaderFrom), req.Cold)
	if err != nil {
		return err
	}
	return httpx.WriteJSON(w, http.StatusOK, s.toSandbox(sb))
}

// ReceiveAhead takes part of the checkpoint of a sandbox another node is
// handing over to this one: only from a node of the fleet. The stream's
// CRC-32C comes after it, as a trailer.
func (s *Handlers) ReceiveAhead(w http.ResponseWriter, r *http.Request) error {
	if !httpx.InfoOf(r).FromNode {
		return errdefs.WithHint(errdefs.NotFound("no such route for callers outside the fleet"),
			"`den move NAME --to NODE` moves a sandbox")
	}
	q := r.URL.Query()
	if s.fleet == nil {
		return errNoFleet
	}
	h := fleet.Handover{Sandbox: r.PathValue("name"), Checkpoint: q.Get("checkpoint"), Part: r.PathValue("part"), Base: q.Get("base")}
	if h.Checkpoint == "" {
		return errdefs.Invalid("no checkpoint given")
	}
	sum := crc32.New(crc32.MakeTable(crc32.Castagnoli))
	body := io.TeeReader(r.Body, sum)
	whole := func() error {
		if _, err := io.Copy(io.Discard, body); err != nil {
			return fmt.Errorf("reading the stream: %w", err)
		}
		if got, want := strconv.FormatUint(uint64(sum.Sum32()), 16), r.Trailer.Get(cluster.HeaderStreamCRC); want == "" || got != want {
			return errdefs.Invalid("the stream did not come whole (CRC-32C %s, sender said %q)", got, want)
		}
		return nil
	}
	if err := s.fleet.ReceiveAhead(r.Context(), r.Header.Get(cluster.HeaderFrom), h, body, whole); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
