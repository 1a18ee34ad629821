package sandbox

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/den-dev/den/internal/errdefs"
)

// Names belong to owners. A sandbox's name is unique among the live
// sandboxes of its owner identity (Sandbox.Owner; "" for admin callers),
// so an owner choosing a name learns nothing of the names others hold.
// A sandbox is named either way:
//
//   - by its id, which is unique everywhere;
//   - by name within one owner's names (GetOwned, for owner scopes);
//   - by name as an admin sees them (Get): admins' own names first, else
//     the one sandbox of any owner that has it. When owners share a name
//     the admin names the one meant by id.

// Get returns a sandbox by id or by name, as an admin names them.
func (s *Service) Get(ctx context.Context, ref string) (*Sandbox, error) {
	if ref == "" {
		return nil, errdefs.WithHint(errdefs.Invalid("no sandbox name given"), "name the sandbox, e.g. `den inspect NAME`")
	}
	sb, err := s.cfg.Store.GetSandbox(ctx, ref)
	if !errors.Is(err, errdefs.ErrNotFound) {
		return sb, err
	}
	named, nerr := s.cfg.Store.SandboxesNamed(ctx, ref)
	if nerr != nil {
		return nil, nerr
	}
	switch len(named) {
	case 0:
		return nil, err
	case 1:
		return named[0], nil
	}
	ids := make([]string, len(named))
	for i, sb := range named {
		ids[i] = sb.ID
	}
	return nil, errdefs.WithHint(errdefs.Conflict("%d sandboxes of different owners are named %q", len(named), ref),
		fmt.Sprintf("name the one you mean by its id: %s", strings.Join(ids, ", ")))
}

// GetOwned returns a sandbox of the owner identity by id or by name among
// its names. Any other is not found, in the words used for a sandbox that
// does not exist.
func (s *Service) GetOwned(ctx context.Context, owner, ref string) (*Sandbox, error) {
	if ref == "" {
		return nil, errdefs.WithHint(errdefs.Invalid("no sandbox name given"), "name the sandbox, e.g. `den inspect NAME`")
	}
	if sb, err := s.cfg.Store.GetSandbox(ctx, ref); err == nil && sb.Owner == owner && sb.ID == ref {
		return sb, nil
	} else if err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		return nil, err
	}
	named, err := s.cfg.Store.SandboxesNamed(ctx, ref)
	if err != nil {
		return nil, err
	}
	for _, sb := range named {
		if sb.Owner == owner {
			return sb, nil
		}
	}
	return nil, NotFound(ref)
}

// NotFound is the error for a sandbox that does not exist, or that the
// caller may not know of: the same words.
func NotFound(ref string) error {
	return errdefs.WithHint(errdefs.NotFound("sandbox %q not found", ref), "list sandboxes with `den ls`")
}

// NameFree refuses a name a live sandbox of owner already has.
func (s *Service) NameFree(ctx context.Context, owner, name string) error {
	named, err := s.cfg.Store.SandboxesNamed(ctx, name)
	if err != nil {
		return err
	}
	for _, sb := range named {
		if sb.Owner == owner {
			return errdefs.WithHint(errdefs.Conflict("sandbox name %q is already in use", name),
				fmt.Sprintf("choose another name, or remove the old one with `den rm -f %s`", name))
		}
	}
	return nil
}
