package httpapi

import (
	"context"
	"net/http"
	"net/netip"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/internal/auth"
	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/httpapi/httpx"
	"github.com/den-dev/den/internal/netpolicy"
	"github.com/den-dev/den/internal/owners"
	"github.com/den-dev/den/internal/quota"
)

// OwnerService keeps owners' quotas and grants. *owners.Service
// implements it.
type OwnerService interface {
	Owner(ctx context.Context, id string) (*owners.Status, error)
	// Owners lists those with a record or a sandbox, and others.
	Owners(ctx context.Context, others ...string) ([]*owners.Status, error)
	SetOwner(ctx context.Context, id string, c owners.Change) (*owners.Status, error)
	// ResetOwner gives an owner dend's default quota and no grants again.
	ResetOwner(ctx context.Context, id string) error
}

// selfOwner names, in /v1/owners/{owner}, the caller's own owner identity.
const selfOwner = "self"

func (s *server) listOwners(w http.ResponseWriter, r *http.Request) error {
	if s.owners == nil {
		return httpx.NotEnabled("owner quotas")
	}
	tokens, err := s.ownerTokens(r.Context())
	if err != nil {
		return err
	}
	var ids []string
	for id := range tokens {
		ids = append(ids, id)
	}
	list, err := s.owners.Owners(r.Context(), ids...)
	if err != nil {
		return err
	}
	return httpx.WriteJSON(w, http.StatusOK, api.OwnerList{Owners: mapSlice(list, func(o *owners.Status) api.Owner { return toOwner(o, tokens[o.ID]) })})
}

func (s *server) getOwner(w http.ResponseWriter, r *http.Request) error {
	if s.owners == nil {
		return httpx.NotEnabled("owner quotas")
	}
	id, names, err := s.resolveOwner(r)
	if err != nil {
		return err
	}
	o, err := s.owners.Owner(r.Context(), id)
	if err != nil {
		return err
	}
	return httpx.WriteJSON(w, http.StatusOK, toOwner(o, names))
}

func (s *server) setOwner(w http.ResponseWriter, r *http.Request) error {
	if s.owners == nil {
		return httpx.NotEnabled("owner quotas")
	}
	var req api.SetOwnerRequest
	if err := httpx.DecodeJSON(w, r, &req, s.maxJSONBytes); err != nil {
		return err
	}
	c, err := ownerChange(req)
	if err != nil {
		return err
	}
	id, names, err := s.resolveOwner(r)
	if err != nil {
		return err
	}
	o, err := s.owners.SetOwner(r.Context(), id, c)
	if err != nil {
		return err
	}
	return httpx.WriteJSON(w, http.StatusOK, toOwner(o, names))
}

func (s *server) resetOwner(w http.ResponseWriter, r *http.Request) error {
	if s.owners == nil {
		return httpx.NotEnabled("owner quotas")
	}
	id, _, err := s.resolveOwner(r)
	if err != nil {
		return err
	}
	if err := s.owners.ResetOwner(r.Context(), id); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func ownerChange(req api.SetOwnerRequest) (owners.Change, error) {
	c := owners.Change{Sandboxes: req.Sandboxes, CPUs: req.CPUs, Checkpoints: req.Checkpoints}
	for _, f := range []struct {
		name string
		v    *string
		into **int64
	}{{"memory", req.Memory, &c.MemoryBytes}, {"disk", req.Disk, &c.DiskBytes}} {
		if f.v == nil {
			continue
		}
		n, err := parseDisk(*f.v)
		if err != nil {
			return c, errdefs.WithHint(errdefs.Invalid("invalid %s quota %q", f.name, *f.v), "use a size like 16G, or 0 for no limit")
		}
		*f.into = &n
	}
	if req.AllowPrivate != nil {
		grants := []netip.Prefix{}
		for _, v := range *req.AllowPrivate {
			p, err := netpolicy.ParsePrivateRange(v)
			if err != nil {
				return c, err
			}
			grants = append(grants, p)
		}
		c.AllowPrivate = &grants
	}
	if c == (owners.Change{}) {
		return c, errdefs.WithHint(errdefs.Invalid("nothing to change"),
			"give at least one of sandboxes, memory, cpus, disk, checkpoints, allow_private")
	}
	return c, nil
}

// resolveOwner finds the owner identity {owner} names, with the names of
// the tokens acting for it. An owner scope names only its own ("self",
// or its identity); an admin names any by a token's id or name, or by
// the identity itself.
func (s *server) resolveOwner(r *http.Request) (string, []string, error) {
	ref := r.PathValue("owner")
	p := httpx.PrincipalOf(r)
	if !p.Scope.Admin() {
		if p.Scope.Owned() && p.Owner != "" && (ref == selfOwner || ref == p.Owner) {
			return p.Owner, nil, nil
		}
		return "", nil, errdefs.WithHint(auth.Forbidden("an owner token reads only its own quota"), "use /v1/owners/self (`den owner show self`)")
	}
	if ref == selfOwner {
		return "", nil, errdefs.WithHint(errdefs.Invalid("admins have no quota"), "name an owner token, by name or id")
	}
	var ts []*auth.Token
	if s.tokens != nil {
		var err error
		if ts, err = s.tokens.List(r.Context()); err != nil {
			return "", nil, err
		}
	}
	tokens := byOwner(ts)
	for _, t := range ts {
		if t.ID == ref || (t.Name == ref && t.RevokedAt == nil) {
			if !t.Scope.Owned() {
				return "", nil, errdefs.WithHint(errdefs.Invalid("token %q has scope %s, which has no quota", t.Name, t.Scope),
					"name a token of scope owner or owner:read")
			}
			return t.Owner, tokens[t.Owner], nil
		}
	}
	if _, ok := tokens[ref]; ok {
		return ref, tokens[ref], nil
	}
	known, err := s.owners.Owners(r.Context())
	if err != nil {
		return "", nil, err
	}
	for _, o := range known {
		if o.ID == ref {
			return ref, nil, nil
		}
	}
	return "", nil, errdefs.WithHint(errdefs.NotFound("owner %q not found", ref), "name an owner token by name or id; see `den token ls` and `den owner ls`")
}

// ownerTokens maps each owner identity that has a token to the names of
// its tokens not revoked (possibly none).
func (s *server) ownerTokens(ctx context.Context) (map[string][]string, error) {
	if s.tokens == nil {
		return map[string][]string{}, nil
	}
	ts, err := s.tokens.List(ctx)
	if err != nil {
		return nil, err
	}
	return byOwner(ts), nil
}

func byOwner(ts []*auth.Token) map[string][]string {
	out := map[string][]string{}
	for _, t := range ts {
		if !t.Scope.Owned() || t.Owner == "" {
			continue
		}
		names := out[t.Owner]
		if t.RevokedAt == nil {
			names = append(names, t.Name)
		}
		out[t.Owner] = names
	}
	return out
}

func toQuota(q quota.Quota) api.Quota {
	return api.Quota{Sandboxes: q.Sandboxes, MemoryBytes: q.MemoryBytes, CPUs: q.CPUs, DiskBytes: q.DiskBytes, Checkpoints: q.Checkpoints}
}

func toOwner(o *owners.Status, tokens []string) api.Owner {
	out := api.Owner{
		ID: o.ID, Tokens: tokens, Default: o.Default, Quota: toQuota(o.Quota),
		Use:          toQuota(quota.Quota(o.Use)),
		AllowPrivate: mapSlice(o.AllowPrivate, netip.Prefix.String),
	}
	if !o.UpdatedAt.IsZero() {
		at := o.UpdatedAt.In(time.UTC)
		out.UpdatedAt = &at
	}
	return out
}
