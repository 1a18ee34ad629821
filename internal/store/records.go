package store

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"time"

	"github.com/den-dev/den/internal/audit"
	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/sandbox"
)

// What every store shares: how a time and the JSON columns are written,
// and the errors a user sees, so that SQLite and PostgreSQL say the same
// thing in the same words.

// TimeLayout keeps nanoseconds and a fixed width in UTC, so stored times
// sort as text (byte order) in time order.
const TimeLayout = "2006-01-02T15:04:05.000000000Z07:00"

// FormatTime writes t in UTC with TimeLayout.
func FormatTime(t time.Time) string { return t.UTC().Format(TimeLayout) }

// ParseTime reads a time FormatTime wrote, in UTC.
func ParseTime(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("parsing stored time %q: %w", s, err)
	}
	return t.UTC(), nil
}

// FormatNullTime writes a nullable time: nil for none.
func FormatNullTime(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := FormatTime(*t)
	return &s
}

// ParseNullTime reads what FormatNullTime wrote.
func ParseNullTime(s *string) (*time.Time, error) {
	if s == nil {
		return nil, nil
	}
	t, err := ParseTime(*s)
	if err != nil {
		return nil, err
	}
	return &t, nil
}

// Now is a store's clock: UTC, without a monotonic reading, so what the
// caller is handed back equals what a later read returns.
func Now() time.Time { return time.Now().UTC() }

// SandboxJSON is what a sandbox keeps as JSON: its spec, idle policy and
// usage.
type SandboxJSON struct {
	Spec, Policy, Usage []byte
}

// EncodeSandbox returns sb's JSON columns.
func EncodeSandbox(sb *sandbox.Sandbox) (SandboxJSON, error) {
	var j SandboxJSON
	var err error
	if j.Spec, err = json.Marshal(sb.Spec); err != nil {
		return j, fmt.Errorf("encoding spec of sandbox %q: %w", sb.Name, err)
	}
	if j.Policy, err = json.Marshal(sb.Policy); err != nil {
		return j, fmt.Errorf("encoding policy of sandbox %q: %w", sb.Name, err)
	}
	usage := sb.Usage
	usage.RunningSince = usage.RunningSince.UTC()
	if j.Usage, err = json.Marshal(usage); err != nil {
		return j, fmt.Errorf("encoding usage of sandbox %q: %w", sb.Name, err)
	}
	return j, nil
}

// DecodeSandbox fills sb's spec, policy and usage from j.
func DecodeSandbox(sb *sandbox.Sandbox, j SandboxJSON) error {
	for _, f := range []struct {
		what string
		text []byte
		into any
	}{{"spec", j.Spec, &sb.Spec}, {"policy", j.Policy, &sb.Policy}, {"usage", j.Usage, &sb.Usage}} {
		if err := json.Unmarshal(f.text, f.into); err != nil {
			return fmt.Errorf("decoding %s of sandbox %q: %w", f.what, sb.ID, err)
		}
	}
	sb.Usage.RunningSince = sb.Usage.RunningSince.UTC()
	return nil
}

// EncodeGrants writes an owner's private ranges as a JSON list.
func EncodeGrants(ps []netip.Prefix) ([]byte, error) {
	grants := make([]string, len(ps))
	for i, p := range ps {
		grants[i] = p.String()
	}
	return json.Marshal(grants)
}

// DecodeGrants reads what EncodeGrants wrote; nil for none.
func DecodeGrants(owner string, b []byte) ([]netip.Prefix, error) {
	var cidrs []string
	if err := json.Unmarshal(b, &cidrs); err != nil {
		return nil, fmt.Errorf("reading the grants of owner %q: %w", owner, err)
	}
	var out []netip.Prefix
	for _, c := range cidrs {
		p, err := netip.ParsePrefix(c)
		if err != nil {
			return nil, fmt.Errorf("reading the grants of owner %q: %w", owner, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// Errors, classified once here.

// ChangedConcurrently is a sandbox update that lost to another.
func ChangedConcurrently(sb *sandbox.Sandbox) error {
	err := errdefs.Conflict("sandbox %q was changed concurrently", sb.Name)
	return errdefs.WithHint(err, "read it again and retry")
}

// NameInUse is a live sandbox of the same owner holding the name.
func NameInUse(name string) error {
	err := errdefs.Conflict("sandbox name %q is already in use", name)
	return errdefs.WithHint(err, fmt.Sprintf("choose another name or remove it with `den rm %s`", name))
}

// SlotInUse is a live sandbox holding sb's network slot.
func SlotInUse(sb *sandbox.Sandbox, other string) error {
	return errdefs.Conflict("network slot %d of sandbox %q is already used by sandbox %q", sb.Slot, sb.Name, other)
}

// Clash is a unique index refusing a sandbox the checks before it let by.
func Clash(sb *sandbox.Sandbox) error {
	return errdefs.Conflict("sandbox %q clashes with another sandbox", sb.Name)
}

// CannotMove is an update to a state the stored one cannot move to.
func CannotMove(sb *sandbox.Sandbox, from sandbox.State) error {
	return errdefs.Conflict("cannot move sandbox %q from %s to %s", sb.Name, from, sb.State)
}

// SandboxIDTaken is a create with an id another sandbox has.
func SandboxIDTaken(id string) error { return errdefs.Conflict("sandbox id %q is already taken", id) }

// InvalidSandbox is a sandbox without an id or a known state.
func InvalidSandbox(sb *sandbox.Sandbox) error {
	return errdefs.Invalid("cannot store sandbox %q: it needs an id and a known state (got %q)", sb.Name, sb.State)
}

func CheckpointNotFound(ref string) error {
	return errdefs.WithHint(errdefs.NotFound("checkpoint %q not found", ref), "list them with `den checkpoints SANDBOX`")
}

func CheckpointNameTaken(name string) error {
	err := errdefs.Conflict("the sandbox already has a checkpoint named %q", name)
	return errdefs.WithHint(err, "pick another name, or leave it out")
}

func RunNotFound(id string) error {
	return errdefs.WithHint(errdefs.NotFound("run %q not found", id), "list the sandbox's runs with `den runs NAME`")
}

func ImageNotFound(name string) error {
	return errdefs.WithHint(errdefs.NotFound("image %q not found", name), "list images with `den image ls`")
}

func ImageVersionNotFound(name string, version int) error {
	return errdefs.WithHint(errdefs.NotFound("image %q has no version %d", name, version), "list the versions with `den image ls`")
}

func OwnerNotFound(id string) error { return errdefs.NotFound("owner %q has no record", id) }

func TokenNotFound(ref string) error {
	return errdefs.WithHint(errdefs.NotFound("token %q not found", ref), "list tokens with `den token ls`")
}

func TokenNameInUse(name string) error {
	return errdefs.WithHint(errdefs.Conflict("token name %q is already in use", name),
		fmt.Sprintf("choose another name, or revoke the old token with `den token revoke %s`", name))
}

func SecretNotFound(name string) error {
	return errdefs.WithHint(errdefs.NotFound("secret %q not found", name),
		"list secrets with `den secret ls`; set one with `den secret set "+name+"`")
}

func RequestNotFound(key string) error { return errdefs.NotFound("no record of request %q", key) }

// Wrap adds what was being done to an error the store did not classify
// itself (the driver's, the context's). Classified errors already say
// what went wrong in words a user can act on, and are returned as they
// are.
func Wrap(err error, format string, a ...any) error {
	if err == nil || errdefs.Class(err) != nil {
		return err
	}
	return fmt.Errorf(format+": %w", append(a, err)...)
}

// InvalidToken is a token without an id or a hash.
func InvalidToken(name string) error {
	return errdefs.Invalid("cannot store token %q: it needs an id and a hash", name)
}

// InvalidAuditLimit is a query for no entries or too many.
func InvalidAuditLimit(n int) error {
	return errdefs.WithHint(errdefs.Invalid("invalid audit limit %d", n), fmt.Sprintf("ask for 1 to %d entries", audit.MaxLimit))
}

// InvalidRequest is an idempotency record without a key or a caller.
func InvalidRequest() error {
	return errdefs.Invalid("cannot record a request without a key and a caller")
}

func SSHKeyNotFound(ref string) error {
	return errdefs.WithHint(errdefs.NotFound("SSH key %q not found", ref), "list keys with `den ssh-key ls`")
}

// SSHKeyTaken is a key registered already, by this token or another.
func SSHKeyTaken(fingerprint string) error {
	return errdefs.WithHint(errdefs.Conflict("SSH key %s is registered already", fingerprint),
		"a key belongs to one token; see `den ssh-key ls`, or make a new key with ssh-keygen")
}

// SSHKeyNameInUse is a name the token has a key of already.
func SSHKeyNameInUse(name string) error {
	return errdefs.WithHint(errdefs.Conflict("this token has an SSH key named %q already", name),
		fmt.Sprintf("choose another name, or remove the old key with `den ssh-key rm %s`", name))
}
