package store

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/den-dev/den/internal/audit"
	"github.com/den-dev/den/internal/auth"
	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/idempotency"
	"github.com/den-dev/den/internal/quota"
	"github.com/den-dev/den/internal/sandbox"
	"github.com/den-dev/den/internal/secret"
)

// The rows both stores keep: the same tables and columns, in SQL both
// SQLite and PostgreSQL read ("user" is quoted, a keyword in
// PostgreSQL). Values go in as Go strings, integers, floats, booleans and
// byte slices, pointers for NULL; JSON columns as strings (SQLite's
// STRICT TEXT takes no blob). Both drivers scan such columns into the
// same Go types, so one function reads each kind of row.

// Scanner is one row of a query: *sql.Row, *sql.Rows, pgx.Row, pgx.Rows.
type Scanner interface {
	Scan(dest ...any) error
}

// Columns of each kind of row, in the order its Scan function reads them.
const (
	SandboxCols = `id, name, spec, state, reason, generation, version, node, slot, token,
	policy, usage, checkpoint, origin, head, pending, owner, init, created_at, updated_at`
	EventCols = `sandbox_id, seq, time, type, from_state, to_state, generation, message`
	RunCols   = `id, sandbox_id, generation, guest_id, argv, cwd, env_names, "user", tty, detached,
	status, exit_code, signal, started_at, ended_at, stdout_size, stderr_size, limit_hit,
	stdout_dropped, stderr_dropped, output_max, output_cut, pid, labels`
	CheckpointCols = `id, sandbox_id, name, kind, parent, memory, generation, manifest, created_at, location, blobs`
	ImageCols      = `name, source, ref, digest, size_bytes, env, cwd, "user", created_at, location, blobs, version`
	OwnerCols      = `id, sandboxes, memory_bytes, cpus, disk_bytes, checkpoints, allow_private, updated_at`
	TokenCols      = `id, name, hash, scope, owner, created_at, expires_at, revoked_at, last_used_at`
	AuditCols      = `seq, time, token_id, token_name, method, route, path, sandbox_id, sandbox, status, error`
	SecretCols     = `name, ciphertext, nonce, key_id, created_at, updated_at`
	// RequestCols ends with whether the body was kept.
	RequestCols = `scope, key, fingerprint, method, path, route, sandbox, state, started_at, ended_at, status, content_type, body, body IS NOT NULL`
)

// SandboxFields are the columns every write of a sandbox sets from its
// fields, in the order of SandboxValues. A create adds id, version and
// both times; an update the new version and update time.
var SandboxFields = []string{"name", "image", "spec", "state", "reason", "generation", "node", "slot", "token",
	"policy", "usage", "checkpoint", "origin", "head", "pending", "owner", "init"}

// SandboxValues returns sb's values for SandboxFields, in their order.
func SandboxValues(sb *sandbox.Sandbox) ([]any, error) {
	j, err := EncodeSandbox(sb)
	if err != nil {
		return nil, err
	}
	return []any{sb.Name, sb.Spec.Image, string(j.Spec), string(sb.State), sb.Reason, sb.Generation, sb.Node, sb.Slot, sb.Token,
		string(j.Policy), string(j.Usage), sb.Checkpoint, sb.Origin, sb.Head, sb.Pending, sb.Owner, sb.Init}, nil
}

// ScanSandbox reads a row of SandboxCols.
func ScanSandbox(row Scanner) (*sandbox.Sandbox, error) {
	var sb sandbox.Sandbox
	var spec, policy, usage []byte
	var created, updated string
	err := row.Scan(&sb.ID, &sb.Name, &spec, &sb.State, &sb.Reason, &sb.Generation, &sb.Version,
		&sb.Node, &sb.Slot, &sb.Token, &policy, &usage, &sb.Checkpoint, &sb.Origin, &sb.Head, &sb.Pending,
		&sb.Owner, &sb.Init, &created, &updated)
	if err != nil {
		return nil, err
	}
	if err := DecodeSandbox(&sb, SandboxJSON{Spec: spec, Policy: policy, Usage: usage}); err != nil {
		return nil, err
	}
	if sb.CreatedAt, err = ParseTime(created); err != nil {
		return nil, err
	}
	if sb.UpdatedAt, err = ParseTime(updated); err != nil {
		return nil, err
	}
	return &sb, nil
}

// NewSandbox returns the record CreateSandbox writes for sb at t:
// Version 1, CreatedAt and UpdatedAt t when zero, times in UTC as a read
// returns them. It refuses a sandbox without an id or a known state.
func NewSandbox(sb *sandbox.Sandbox, t time.Time) (*sandbox.Sandbox, error) {
	if sb.ID == "" || !sb.State.Valid() {
		return nil, InvalidSandbox(sb)
	}
	rec := *sb
	rec.Version = 1
	if rec.CreatedAt.IsZero() {
		rec.CreatedAt = t
	}
	if rec.UpdatedAt.IsZero() {
		rec.UpdatedAt = rec.CreatedAt
	}
	rec.CreatedAt, rec.UpdatedAt = rec.CreatedAt.UTC(), rec.UpdatedAt.UTC()
	rec.Usage.RunningSince = rec.Usage.RunningSince.UTC()
	return &rec, nil
}

// EventValues returns the values of ev's row after its seq (EventCols
// without seq), filling in what the caller may leave out: the state it
// moved from (from) and to (sb's), and the time (t).
func EventValues(sb *sandbox.Sandbox, from sandbox.State, ev sandbox.Event, t time.Time) []any {
	if ev.From == "" {
		ev.From = from
	}
	if ev.To == "" {
		ev.To = sb.State
	}
	if ev.Time.IsZero() {
		ev.Time = t
	}
	return []any{sb.ID, FormatTime(ev.Time), ev.Type, string(ev.From), string(ev.To), ev.Generation, ev.Message}
}

// ScanEvent reads a row of EventCols.
func ScanEvent(row Scanner) (sandbox.Event, error) {
	var ev sandbox.Event
	var t string
	if err := row.Scan(&ev.SandboxID, &ev.Seq, &t, &ev.Type, &ev.From, &ev.To, &ev.Generation, &ev.Message); err != nil {
		return ev, err
	}
	var err error
	ev.Time, err = ParseTime(t)
	return ev, err
}

// NewRun returns the record CreateRun writes for r at t: StartedAt t
// when zero, times in UTC.
func NewRun(r *sandbox.Run, t time.Time) *sandbox.Run {
	rec := *r
	if rec.StartedAt.IsZero() {
		rec.StartedAt = t
	}
	rec.StartedAt = rec.StartedAt.UTC()
	if rec.EndedAt != nil {
		ended := rec.EndedAt.UTC()
		rec.EndedAt = &ended
	}
	return &rec
}

// RunValues returns r's values for RunCols after id and sandbox_id.
func RunValues(r *sandbox.Run) ([]any, error) {
	argv, err := json.Marshal(r.Argv)
	if err != nil {
		return nil, fmt.Errorf("encoding argv of run %q: %w", r.ID, err)
	}
	envNames, err := json.Marshal(r.EnvNames)
	if err != nil {
		return nil, fmt.Errorf("encoding env names of run %q: %w", r.ID, err)
	}
	labels, err := json.Marshal(r.Labels)
	if err != nil {
		return nil, fmt.Errorf("encoding labels of run %q: %w", r.ID, err)
	}
	if r.Labels == nil {
		labels = []byte("{}")
	}
	return []any{r.Generation, r.GuestID, string(argv), r.Cwd, string(envNames), r.User, r.TTY, r.Detached,
		string(r.Status), r.ExitCode, r.Signal, FormatTime(r.StartedAt), FormatNullTime(r.EndedAt), r.StdoutSize, r.StderrSize, r.LimitHit,
		r.StdoutDropped, r.StderrDropped, r.OutputMax, r.OutputCut, r.PID, string(labels)}, nil
}

// ScanRun reads a row of RunCols.
func ScanRun(row Scanner) (*sandbox.Run, error) {
	var r sandbox.Run
	var argv, envNames, labels []byte
	var started string
	var ended *string
	err := row.Scan(&r.ID, &r.SandboxID, &r.Generation, &r.GuestID, &argv, &r.Cwd, &envNames, &r.User,
		&r.TTY, &r.Detached, &r.Status, &r.ExitCode, &r.Signal, &started, &ended, &r.StdoutSize, &r.StderrSize, &r.LimitHit,
		&r.StdoutDropped, &r.StderrDropped, &r.OutputMax, &r.OutputCut, &r.PID, &labels)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(argv, &r.Argv); err != nil {
		return nil, fmt.Errorf("decoding argv of run %q: %w", r.ID, err)
	}
	if err := json.Unmarshal(envNames, &r.EnvNames); err != nil {
		return nil, fmt.Errorf("decoding env names of run %q: %w", r.ID, err)
	}
	if err := json.Unmarshal(labels, &r.Labels); err != nil {
		return nil, fmt.Errorf("decoding labels of run %q: %w", r.ID, err)
	}
	if len(r.Labels) == 0 {
		r.Labels = nil
	}
	if r.StartedAt, err = ParseTime(started); err != nil {
		return nil, err
	}
	if r.EndedAt, err = ParseNullTime(ended); err != nil {
		return nil, err
	}
	return &r, nil
}

// CheckpointValues returns c's values for CheckpointCols. NeededBy is
// not stored.
func CheckpointValues(c *sandbox.Checkpoint) ([]any, error) {
	manifest, err := json.Marshal(c.Manifest)
	if err != nil {
		return nil, fmt.Errorf("encoding manifest of checkpoint %q: %w", c.ID, err)
	}
	blobs, err := json.Marshal(c.Blobs)
	if err != nil {
		return nil, fmt.Errorf("encoding blobs of checkpoint %q: %w", c.ID, err)
	}
	return []any{c.ID, c.SandboxID, c.Name, c.Kind, c.Parent, c.Memory, c.Generation, string(manifest), FormatTime(c.CreatedAt),
		CheckpointLocation(c.Location), string(blobs)}, nil
}

// CheckpointLocation is the location a checkpoint or an image is stored
// with: local unless it says otherwise.
func CheckpointLocation(l string) string {
	if l == "" {
		return sandbox.LocationLocal
	}
	return l
}

// ScanCheckpoint reads a row of CheckpointCols.
func ScanCheckpoint(row Scanner) (*sandbox.Checkpoint, error) {
	var c sandbox.Checkpoint
	var manifest, blobs []byte
	var created string
	err := row.Scan(&c.ID, &c.SandboxID, &c.Name, &c.Kind, &c.Parent, &c.Memory, &c.Generation, &manifest, &created,
		&c.Location, &blobs)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(manifest, &c.Manifest); err != nil {
		return nil, fmt.Errorf("decoding manifest of checkpoint %q: %w", c.ID, err)
	}
	if err := json.Unmarshal(blobs, &c.Blobs); err != nil {
		return nil, fmt.Errorf("decoding blobs of checkpoint %q: %w", c.ID, err)
	}
	if c.CreatedAt, err = ParseTime(created); err != nil {
		return nil, err
	}
	return &c, nil
}

// ImageValues returns im's values for ImageCols.
func ImageValues(im *sandbox.Image) ([]any, error) {
	env, err := json.Marshal(im.Env)
	if err != nil {
		return nil, fmt.Errorf("encoding env of image %q: %w", im.Name, err)
	}
	blobs, err := json.Marshal(im.Blobs)
	if err != nil {
		return nil, fmt.Errorf("encoding blobs of image %q: %w", im.Name, err)
	}
	return []any{im.Name, im.Source, im.Ref, im.Digest, im.SizeBytes, string(env), im.Cwd, im.User, FormatTime(im.CreatedAt),
		CheckpointLocation(im.Location), string(blobs), max(im.Version, 1)}, nil
}

// ScanImage reads a row of ImageCols.
func ScanImage(row Scanner) (*sandbox.Image, error) {
	var im sandbox.Image
	var env, blobs []byte
	var created string
	err := row.Scan(&im.Name, &im.Source, &im.Ref, &im.Digest, &im.SizeBytes, &env, &im.Cwd, &im.User, &created,
		&im.Location, &blobs, &im.Version)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(blobs, &im.Blobs); err != nil {
		return nil, fmt.Errorf("decoding blobs of image %q: %w", im.Name, err)
	}
	if err := json.Unmarshal(env, &im.Env); err != nil {
		return nil, fmt.Errorf("decoding env of image %q: %w", im.Name, err)
	}
	if im.CreatedAt, err = ParseTime(created); err != nil {
		return nil, err
	}
	return &im, nil
}

// OwnerValues returns o's values for OwnerCols.
func OwnerValues(o *quota.Owner) ([]any, error) {
	grants, err := EncodeGrants(o.AllowPrivate)
	if err != nil {
		return nil, err
	}
	q := o.Quota
	return []any{o.ID, q.Sandboxes, q.MemoryBytes, q.CPUs, q.DiskBytes, q.Checkpoints, string(grants), FormatTime(o.UpdatedAt)}, nil
}

// ScanOwner reads a row of OwnerCols.
func ScanOwner(row Scanner) (*quota.Owner, error) {
	var o quota.Owner
	var grants []byte
	var updated string
	q := &o.Quota
	if err := row.Scan(&o.ID, &q.Sandboxes, &q.MemoryBytes, &q.CPUs, &q.DiskBytes, &q.Checkpoints, &grants, &updated); err != nil {
		return nil, err
	}
	var err error
	if o.AllowPrivate, err = DecodeGrants(o.ID, grants); err != nil {
		return nil, err
	}
	if o.UpdatedAt, err = ParseTime(updated); err != nil {
		return nil, err
	}
	return &o, nil
}

// TokenValues returns t's values for TokenCols.
func TokenValues(t *auth.Token) []any {
	return []any{t.ID, t.Name, t.Hash, string(t.Scope), t.Owner, FormatTime(t.CreatedAt),
		FormatNullTime(t.ExpiresAt), FormatNullTime(t.RevokedAt), FormatNullTime(t.LastUsedAt)}
}

// ScanToken reads a row of TokenCols.
func ScanToken(row Scanner) (*auth.Token, error) {
	var t auth.Token
	var scope, created string
	var expires, revoked, used *string
	if err := row.Scan(&t.ID, &t.Name, &t.Hash, &scope, &t.Owner, &created, &expires, &revoked, &used); err != nil {
		return nil, err
	}
	t.Scope = auth.Scope(scope)
	var err error
	if t.CreatedAt, err = ParseTime(created); err != nil {
		return nil, err
	}
	for _, f := range []struct {
		from *string
		into **time.Time
	}{{expires, &t.ExpiresAt}, {revoked, &t.RevokedAt}, {used, &t.LastUsedAt}} {
		if *f.into, err = ParseNullTime(f.from); err != nil {
			return nil, err
		}
	}
	return &t, nil
}

// NewToken returns the record CreateToken writes for t at now: CreatedAt
// now when zero, every time in UTC. It refuses a token without an id or
// a hash.
func NewToken(t *auth.Token, now time.Time) (*auth.Token, error) {
	if t.ID == "" || t.Hash == "" {
		return nil, InvalidToken(t.Name)
	}
	rec := *t
	if rec.CreatedAt.IsZero() {
		rec.CreatedAt = now
	}
	rec.CreatedAt = rec.CreatedAt.UTC()
	for _, p := range []**time.Time{&rec.ExpiresAt, &rec.RevokedAt, &rec.LastUsedAt} {
		if *p != nil {
			u := (*p).UTC()
			*p = &u
		}
	}
	return &rec, nil
}

// ScanAudit reads a row of AuditCols.
func ScanAudit(row Scanner) (*audit.Entry, error) {
	var e audit.Entry
	var t string
	err := row.Scan(&e.Seq, &t, &e.TokenID, &e.TokenName, &e.Method, &e.Route, &e.Path, &e.SandboxID, &e.Sandbox, &e.Status, &e.Error)
	if err != nil {
		return nil, err
	}
	e.Time, err = ParseTime(t)
	return &e, err
}

// AuditLimit is how many entries a query of f returns: the default for
// 0, refused past the maximum.
func AuditLimit(f audit.Filter) (int, error) {
	switch {
	case f.Limit == 0:
		return audit.DefaultLimit, nil
	case f.Limit < 0 || f.Limit > audit.MaxLimit:
		return 0, InvalidAuditLimit(f.Limit)
	}
	return f.Limit, nil
}

// ScanSecret reads a row of SecretCols.
func ScanSecret(row Scanner) (*secret.Record, error) {
	var r secret.Record
	var created, updated string
	if err := row.Scan(&r.Name, &r.Ciphertext, &r.Nonce, &r.KeyID, &created, &updated); err != nil {
		return nil, err
	}
	var err error
	if r.CreatedAt, err = ParseTime(created); err != nil {
		return nil, err
	}
	if r.UpdatedAt, err = ParseTime(updated); err != nil {
		return nil, err
	}
	return &r, nil
}

// BeginRequest readies r to be recorded as begun at now: in progress,
// StartedAt now when zero, in UTC. It refuses a record without a key or
// a caller.
func BeginRequest(r *idempotency.Record, now time.Time) error {
	if r.Key == "" || r.Scope == "" {
		return InvalidRequest()
	}
	if r.StartedAt.IsZero() {
		r.StartedAt = now
	}
	r.StartedAt = r.StartedAt.UTC()
	r.State = idempotency.InProgress
	return nil
}

// FinishRequest readies r's answer to be recorded at now (EndedAt now
// when zero, State done when unset) and returns the body to store: nil
// (NULL) when it was not kept.
func FinishRequest(r *idempotency.Record, now time.Time) []byte {
	if r.EndedAt.IsZero() {
		r.EndedAt = now
	}
	r.EndedAt = r.EndedAt.UTC()
	if r.State == "" {
		r.State = idempotency.Done
	}
	return RequestBody(r)
}

// RequestBody is the body column of r: nil (NULL) when not kept.
func RequestBody(r *idempotency.Record) []byte {
	if !r.BodyKept {
		return nil
	}
	if r.Body == nil {
		return []byte{}
	}
	return r.Body
}

// ScanRequest reads a row of RequestCols.
func ScanRequest(row Scanner) (*idempotency.Record, error) {
	var r idempotency.Record
	var state, started string
	var ended *string
	var body []byte
	err := row.Scan(&r.Scope, &r.Key, &r.Fingerprint, &r.Method, &r.Path, &r.Route, &r.Sandbox, &state, &started, &ended,
		&r.Status, &r.ContentType, &body, &r.BodyKept)
	if err != nil {
		return nil, err
	}
	r.State = idempotency.State(state)
	if r.StartedAt, err = ParseTime(started); err != nil {
		return nil, err
	}
	if ended != nil {
		if r.EndedAt, err = ParseTime(*ended); err != nil {
			return nil, err
		}
	}
	if r.BodyKept {
		r.Body = body
		if r.Body == nil {
			r.Body = []byte{}
		}
	}
	return &r, nil
}

// NewCheckpoint returns the record CreateCheckpoint writes for c at now:
// CreatedAt now when zero, in UTC. It refuses a checkpoint without an id
// or a sandbox.
func NewCheckpoint(c *sandbox.Checkpoint, now time.Time) (*sandbox.Checkpoint, error) {
	if c.ID == "" || c.SandboxID == "" {
		return nil, errdefs.Invalid("cannot store checkpoint %q of sandbox %q: it needs an id and a sandbox id", c.ID, c.SandboxID)
	}
	rec := *c
	if rec.CreatedAt.IsZero() {
		rec.CreatedAt = now
	}
	rec.CreatedAt = rec.CreatedAt.UTC()
	rec.Location = CheckpointLocation(rec.Location)
	return &rec, nil
}

// ValidLocation refuses a location that is not one of the three.
func ValidLocation(l string) error {
	switch l {
	case sandbox.LocationLocal, sandbox.LocationUploading, sandbox.LocationUploaded:
		return nil
	}
	return errdefs.Invalid("checkpoint location %q is not local, uploading or uploaded", l)
}

// NewImage returns the record PutImage writes for im at now: CreatedAt
// now when zero, in UTC. It refuses an image without a name.
func NewImage(im *sandbox.Image, now time.Time) (*sandbox.Image, error) {
	if im.Name == "" {
		return nil, errdefs.Invalid("cannot store an image without a name")
	}
	rec := *im
	if rec.CreatedAt.IsZero() {
		rec.CreatedAt = now
	}
	rec.CreatedAt = rec.CreatedAt.UTC()
	rec.Location = CheckpointLocation(rec.Location)
	rec.Version = max(rec.Version, 1)
	return &rec, nil
}

// SSHKeyCols are the columns of an SSH key, in the order SSHKeyValues and
// ScanSSHKey use.
const SSHKeyCols = `fingerprint, name, token_id, type, public_key, comment, created_at`

// SSHKeyValues returns k's values for SSHKeyCols.
func SSHKeyValues(k *auth.SSHKey) []any {
	return []any{k.Fingerprint, k.Name, k.TokenID, k.Type, k.PublicKey, k.Comment, FormatTime(k.CreatedAt)}
}

// ScanSSHKey reads a row of SSHKeyCols.
func ScanSSHKey(row Scanner) (*auth.SSHKey, error) {
	var k auth.SSHKey
	var created string
	if err := row.Scan(&k.Fingerprint, &k.Name, &k.TokenID, &k.Type, &k.PublicKey, &k.Comment, &created); err != nil {
		return nil, err
	}
	var err error
	k.CreatedAt, err = ParseTime(created)
	return &k, err
}

// NewSSHKey returns the record CreateSSHKey writes for k at now:
// CreatedAt now when zero, in UTC. It refuses a key without a
// fingerprint, name or token.
func NewSSHKey(k *auth.SSHKey, now time.Time) (*auth.SSHKey, error) {
	if k.Fingerprint == "" || k.Name == "" || k.TokenID == "" || k.PublicKey == "" {
		return nil, errdefs.Invalid("cannot store SSH key %q: it needs a fingerprint, a name, a token and the key", k.Name)
	}
	rec := *k
	if rec.CreatedAt.IsZero() {
		rec.CreatedAt = now
	}
	rec.CreatedAt = rec.CreatedAt.UTC()
	return &rec, nil
}
