package api

import "time"

// Quota is what the sandboxes of one owner may hold together, or (as an
// owner's Use) what they hold. In a quota, 0 sets no limit. Memory, CPUs
// and disk are the sums of the limits of its sandboxes that are not
// destroyed, whatever their state; checkpoints count manual ones.
type Quota struct {
	Sandboxes   int     `json:"sandboxes"`
	MemoryBytes int64   `json:"memory_bytes"`
	CPUs        float64 `json:"cpus"`
	DiskBytes   int64   `json:"disk_bytes"`
	Checkpoints int     `json:"checkpoints"`
}

// Owner is an owner identity's quota, use and private-range grants.
type Owner struct {
	// ID is the owner identity: the id of the owner token it began with.
	ID string `json:"id"`
	// Tokens names the tokens, not revoked, that act for it (admins only).
	Tokens []string `json:"tokens,omitempty"`
	// Default is true when no admin set its quota: it is dend's default.
	Default bool  `json:"default"`
	Quota   Quota `json:"quota"`
	Use     Quota `json:"use"`
	// AllowPrivate are the private ranges (CIDRs) its network rules may
	// name beyond those dend opens to every owner.
	AllowPrivate []string   `json:"allow_private"`
	UpdatedAt    *time.Time `json:"updated_at,omitempty"`
}

// OwnerList is the body of GET /v1/owners.
type OwnerList struct {
	Owners []Owner `json:"owners"`
}

// SetOwnerRequest is the body of PATCH /v1/owners/{owner}: absent fields
// keep their value; 0 (or "0") sets no limit.
type SetOwnerRequest struct {
	Sandboxes   *int     `json:"sandboxes,omitempty"`
	Memory      *string  `json:"memory,omitempty"` // e.g. "16G"
	CPUs        *float64 `json:"cpus,omitempty"`
	Disk        *string  `json:"disk,omitempty"` // e.g. "100G"
	Checkpoints *int     `json:"checkpoints,omitempty"`
	// AllowPrivate replaces the owner's grants; [] removes them all.
	AllowPrivate *[]string `json:"allow_private,omitempty"`
}
