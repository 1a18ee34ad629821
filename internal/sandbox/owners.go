package sandbox

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/quota"
)

// OwnerStatus is an owner's quota and grants with what it uses now.
type OwnerStatus struct {
	quota.Owner
	// Default says the owner has no record: its quota is dend's default.
	Default bool
	Use     quota.Use
}

// OwnerChange changes an owner's record: nil fields keep their value (the
// default quota's, for an owner without a record). A quota field of 0
// sets no limit on that resource.
type OwnerChange struct {
	Sandboxes    *int
	MemoryBytes  *int64
	CPUs         *float64
	DiskBytes    *int64
	Checkpoints  *int
	AllowPrivate *[]netip.Prefix
}

// Owner returns an owner's quota, grants and use.
func (s *Service) Owner(ctx context.Context, id string) (*OwnerStatus, error) {
	if id == "" {
		return nil, errdefs.WithHint(errdefs.Invalid("admins have no quota"), "name an owner token, by name or id, or its owner identity")
	}
	o, def, err := s.QuotaOf(ctx, id)
	if err != nil {
		return nil, err
	}
	use, err := s.UseOf(ctx, id)
	if err != nil {
		return nil, err
	}
	return &OwnerStatus{Owner: *o, Default: def, Use: use}, nil
}

// Owners returns every owner identity that has a record or a sandbox, by
// id, with others (e.g. those of tokens) that the caller knows of.
func (s *Service) Owners(ctx context.Context, others ...string) ([]*OwnerStatus, error) {
	ids := map[string]bool{}
	for _, id := range others {
		if id != "" {
			ids[id] = true
		}
	}
	if st := s.cfg.Quotas.Owners; st != nil {
		recs, err := st.ListOwners(ctx)
		if err != nil {
			return nil, fmt.Errorf("listing owners: %w", err)
		}
		for _, o := range recs {
			ids[o.ID] = true
		}
	}
	sbs, err := s.cfg.Store.ListSandboxes(ctx)
	if err != nil {
		return nil, err
	}
	for _, sb := range sbs {
		if sb.Owner != "" {
			ids[sb.Owner] = true
		}
	}
	sorted := make([]string, 0, len(ids))
	for id := range ids {
		sorted = append(sorted, id)
	}
	sort.Strings(sorted)
	out := make([]*OwnerStatus, 0, len(sorted))
	for _, id := range sorted {
		o, err := s.Owner(ctx, id)
		if err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, nil
}

// SetOwner changes an owner's quota or grants. A quota lowered below
// what the owner uses takes nothing away: it is refused more until it is
// back under. A grant cannot be taken away while a policy of one of the
// owner's sandboxes needs it (ErrConflict naming them).
func (s *Service) SetOwner(ctx context.Context, id string, c OwnerChange) (*OwnerStatus, error) {
	st := s.cfg.Quotas.Owners
	if st == nil {
		return nil, errdefs.Unavailable("owner records are not kept by this dend")
	}
	if id == "" {
		return nil, errdefs.WithHint(errdefs.Invalid("admins have no quota"), "name an owner token, by name or id, or its owner identity")
	}
	// Under the owner's admission lock: no verb of its is admitted with
	// the old record while this one is written.
	defer s.admission.Lock(id)()
	cur, _, err := s.QuotaOf(ctx, id)
	if err != nil {
		return nil, err
	}
	rec := *cur
	rec.ID = id
	q := &rec.Quota
	set(&q.Sandboxes, c.Sandboxes)
	set(&q.MemoryBytes, c.MemoryBytes)
	set(&q.CPUs, c.CPUs)
	set(&q.DiskBytes, c.DiskBytes)
	set(&q.Checkpoints, c.Checkpoints)
	if err := q.Validate(); err != nil {
		return nil, err
	}
	if c.AllowPrivate != nil {
		rec.AllowPrivate = normalPrefixes(*c.AllowPrivate)
		if err := s.grantsStillCover(ctx, id, rec.AllowPrivate); err != nil {
			return nil, err
		}
	}
	rec.UpdatedAt = s.cfg.Now().UTC()
	if err := st.PutOwner(ctx, &rec); err != nil {
		return nil, fmt.Errorf("setting the quota of owner %s: %w", id, err)
	}
	use, err := s.UseOf(ctx, id)
	if err != nil {
		return nil, err
	}
	return &OwnerStatus{Owner: rec, Use: use}, nil
}

// ResetOwner removes an owner's record: it has dend's default quota and
// no grants again, unless a policy of its sandboxes needs a grant.
func (s *Service) ResetOwner(ctx context.Context, id string) error {
	st := s.cfg.Quotas.Owners
	if st == nil {
		return errdefs.Unavailable("owner records are not kept by this dend")
	}
	defer s.admission.Lock(id)()
	if err := s.grantsStillCover(ctx, id, nil); err != nil {
		return err
	}
	return st.DeleteOwner(ctx, id)
}

// grantsStillCover refuses grants that no longer admit the network
// policy of one of owner's sandboxes.
func (s *Service) grantsStillCover(ctx context.Context, owner string, grants []netip.Prefix) error {
	sbs, err := s.cfg.Store.ListSandboxes(ctx)
	if err != nil {
		return err
	}
	var names []string
	for _, sb := range sbs {
		if sb.Owner == owner && s.cfg.Reach.Check(sb.Spec.Network, grants) != nil {
			names = append(names, sb.Name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	return errdefs.WithHint(errdefs.Conflict("the network policies of sandboxes %s of owner %s name private ranges it would no longer be granted", ownerNames(names), owner),
		"change their rules first (`den network NAME`), or keep the grant")
}

// ownerNames renders a list of names for a message.
func ownerNames(names []string) string { return strings.Join(names, ", ") }

func normalPrefixes(ps []netip.Prefix) []netip.Prefix {
	out := make([]netip.Prefix, 0, len(ps))
	for _, p := range ps {
		p = p.Masked()
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

func set[T any](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}
