package owners

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/quota"
	"github.com/den-dev/den/internal/sandbox"
)

// Status is an owner's quota and grants with what it uses now.
type Status struct {
	quota.Owner
	// Default says the owner has no record: its quota is dend's default.
	Default bool
	Use     quota.Use
}

// Change changes an owner's record: nil fields keep their value (the
// default quota's, for an owner without a record). A quota field of 0
// sets no limit on that resource.
type Change struct {
	Sandboxes    *int
	MemoryBytes  *int64
	CPUs         *float64
	DiskBytes    *int64
	Checkpoints  *int
	AllowPrivate *[]netip.Prefix
}

// Config is what a Service reads owners through.
type Config struct {
	// Sandboxes is this node's sandbox core: it says an owner's quota
	// and use, and holds an owner's admission while its record changes.
	Sandboxes *sandbox.Service
	// Store holds the records of every sandbox.
	Store sandbox.Store
	// Records keeps owner records, as the core's quota.Quotas.Owners;
	// nil: they are not kept, and every owner has dend's default.
	Records quota.OwnerStore
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// Service reads and changes owners' quotas and grants. It keeps no state
// of its own: the records are the store's.
type Service struct {
	sandboxes *sandbox.Service
	store     sandbox.Store
	records   quota.OwnerStore
	now       func() time.Time
}

// New returns the owners' verbs over cfg.
func New(cfg Config) *Service {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Service{sandboxes: cfg.Sandboxes, store: cfg.Store, records: cfg.Records, now: cfg.Now}
}

// noQuota refuses an empty id: admins have no quota.
func noQuota() error {
	return errdefs.WithHint(errdefs.Invalid("admins have no quota"), "name an owner token, by name or id, or its owner identity")
}

// Owner returns an owner's quota, grants and use.
func (s *Service) Owner(ctx context.Context, id string) (*Status, error) {
	if id == "" {
		return nil, noQuota()
	}
	o, def, err := s.sandboxes.QuotaOf(ctx, id)
	if err != nil {
		return nil, err
	}
	use, err := s.sandboxes.UseOf(ctx, id)
	if err != nil {
		return nil, err
	}
	return &Status{Owner: *o, Default: def, Use: use}, nil
}

// Owners returns every owner identity that has a record or a sandbox, by
// id, with others (e.g. those of tokens) that the caller knows of.
func (s *Service) Owners(ctx context.Context, others ...string) ([]*Status, error) {
	ids := map[string]bool{}
	for _, id := range others {
		if id != "" {
			ids[id] = true
		}
	}
	if s.records != nil {
		recs, err := s.records.ListOwners(ctx)
		if err != nil {
			return nil, fmt.Errorf("listing owners: %w", err)
		}
		for _, o := range recs {
			ids[o.ID] = true
		}
	}
	sbs, err := s.store.ListSandboxes(ctx)
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
	out := make([]*Status, 0, len(sorted))
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
func (s *Service) SetOwner(ctx context.Context, id string, c Change) (*Status, error) {
	if s.records == nil {
		return nil, errdefs.Unavailable("owner records are not kept by this dend")
	}
	if id == "" {
		return nil, noQuota()
	}
	// Under the owner's admission lock: no verb of its is admitted with
	// the old record while this one is written.
	defer s.sandboxes.LockOwner(id)()
	cur, _, err := s.sandboxes.QuotaOf(ctx, id)
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
	rec.UpdatedAt = s.now().UTC()
	if err := s.records.PutOwner(ctx, &rec); err != nil {
		return nil, fmt.Errorf("setting the quota of owner %s: %w", id, err)
	}
	use, err := s.sandboxes.UseOf(ctx, id)
	if err != nil {
		return nil, err
	}
	return &Status{Owner: rec, Use: use}, nil
}

// ResetOwner removes an owner's record: it has dend's default quota and
// no grants again, unless a policy of its sandboxes needs a grant.
func (s *Service) ResetOwner(ctx context.Context, id string) error {
	if s.records == nil {
		return errdefs.Unavailable("owner records are not kept by this dend")
	}
	defer s.sandboxes.LockOwner(id)()
	if err := s.grantsStillCover(ctx, id, nil); err != nil {
		return err
	}
	return s.records.DeleteOwner(ctx, id)
}

// grantsStillCover refuses grants that no longer admit the network
// policy of one of owner's sandboxes.
func (s *Service) grantsStillCover(ctx context.Context, owner string, grants []netip.Prefix) error {
	sbs, err := s.store.ListSandboxes(ctx)
	if err != nil {
		return err
	}
	reach := s.sandboxes.Reach()
	var names []string
	for _, sb := range sbs {
		if sb.Owner == owner && reach.Check(sb.Spec.Network, grants) != nil {
			names = append(names, sb.Name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	return errdefs.WithHint(errdefs.Conflict("the network policies of sandboxes %s of owner %s name private ranges it would no longer be granted", strings.Join(names, ", "), owner),
		"change their rules first (`den network NAME`), or keep the grant")
}

// normalPrefixes masks each grant to its network and drops repeats,
// keeping the order given.
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

// set sets *dst to *v, unless v is nil.
func set[T any](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}
