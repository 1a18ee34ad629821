package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path"
	"regexp"
	"sort"
	"strings"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/guest"
)

// SecretGrant gives a sandbox's commands one secret, at exec time: in the
// environment variable Env (by default the secret's name), or as the file
// File in guest.SecretDir, an in-memory mount. Only the grant is kept in
// the spec, never the value.
type SecretGrant struct {
	Name string `json:"name"`
	Env  string `json:"env,omitempty"`
	File string `json:"file,omitempty"`
}

// MaxSecretGrants bounds the grants of one sandbox.
const MaxSecretGrants = guest.MaxSecrets

var (
	secretNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)
	fileNameRE   = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$`)
)

// ValidateSecretName checks a secret's name: an environment variable's.
func ValidateSecretName(name string) error {
	if secretNameRE.MatchString(name) {
		return nil
	}
	return errdefs.WithHint(errdefs.Invalid("invalid secret name %q", name),
		"use 1-64 letters, digits and underscores, not starting with a digit, like an environment variable: DB_PASSWORD")
}

// ValidateGrants checks grants and fills in defaults: a grant with neither
// a variable nor a file goes to the variable of its name.
func ValidateGrants(grants []SecretGrant) error {
	if len(grants) > MaxSecretGrants {
		return errdefs.TooLarge("%d secret grants, over the limit of %d", len(grants), MaxSecretGrants)
	}
	targets := map[string]bool{}
	for i := range grants {
		g := &grants[i]
		if err := ValidateSecretName(g.Name); err != nil {
			return err
		}
		if g.Env != "" && g.File != "" {
			return errdefs.WithHint(errdefs.Invalid("secret %s granted both as variable %s and as file %s", g.Name, g.Env, g.File),
				"grant it twice to have both")
		}
		if g.Env == "" && g.File == "" {
			g.Env = g.Name
		}
		target := "env " + g.Env
		if g.File != "" {
			if !fileNameRE.MatchString(g.File) {
				return errdefs.WithHint(errdefs.Invalid("invalid secret file name %q", g.File),
					fmt.Sprintf("give a plain file name, such as key.pem: the file is made in %s", guest.SecretDir))
			}
			target = "file " + g.File
		} else if !envKeyRE.MatchString(g.Env) {
			return errdefs.WithHint(errdefs.Invalid("invalid environment variable name %q for secret %s", g.Env, g.Name),
				"use letters, digits and underscores, not starting with a digit")
		}
		if targets[target] {
			return errdefs.Invalid("two secrets granted to the same %s", target)
		}
		targets[target] = true
	}
	sort.SliceStable(grants, func(i, j int) bool { return grants[i].Name < grants[j].Name })
	return nil
}

// secretNames lists the names of grants, for history.
func secretNames(grants []SecretGrant) string {
	if len(grants) == 0 {
		return "none"
	}
	names := make([]string, len(grants))
	for i, g := range grants {
		names[i] = g.Name
		if g.File != "" {
			names[i] += " (file " + g.File + ")"
		} else if g.Env != g.Name {
			names[i] += " (as " + g.Env + ")"
		}
	}
	return strings.Join(names, ", ")
}

// checkSecretsExist refuses grants of secrets that are not set, so a
// create or grant cannot succeed into execs that all fail.
func (s *Service) checkSecretsExist(ctx context.Context, grants []SecretGrant) error {
	for _, g := range grants {
		if s.cfg.Secrets == nil {
			return errdefs.Unavailable("this dend keeps no secrets")
		}
		v, err := s.cfg.Secrets.Reveal(ctx, g.Name)
		clear(v)
		if errors.Is(err, errdefs.ErrNotFound) {
			return errdefs.WithHint(errdefs.NotFound("secret %s is not set", g.Name), "set it first: `den secret set "+g.Name+"`")
		}
		if err != nil {
			return fmt.Errorf("checking secret %s: %w", g.Name, err)
		}
	}
	return nil
}

// revealGrants fetches the values a command of sb gets. The caller wipes
// them once sent.
func (s *Service) revealGrants(ctx context.Context, sb *Sandbox) ([]guest.Secret, error) {
	var out []guest.Secret
	for _, g := range sb.Spec.Secrets {
		if s.cfg.Secrets == nil {
			return nil, errdefs.Unavailable("this dend keeps no secrets")
		}
		v, err := s.cfg.Secrets.Reveal(ctx, g.Name)
		if errors.Is(err, errdefs.ErrNotFound) {
			wipeSecrets(out)
			return nil, errdefs.WithHint(errdefs.NotFound("secret %s granted to sandbox %s is no longer set", g.Name, sb.Name),
				fmt.Sprintf("set it again, or revoke it: `den secret revoke %s %s`", sb.Name, g.Name))
		}
		if err != nil {
			wipeSecrets(out)
			return nil, fmt.Errorf("reading secret %s: %w", g.Name, err)
		}
		sec := guest.Secret{Env: g.Env, Value: v}
		if g.File != "" {
			sec = guest.Secret{File: path.Join(guest.SecretDir, g.File), Value: v}
		}
		out = append(out, sec)
	}
	return out, nil
}

func wipeSecrets(secrets []guest.Secret) {
	for _, sec := range secrets {
		clear(sec.Value)
	}
}

// SetSecrets replaces the secrets a sandbox's commands get. Revoking one
// removes it from every later exec at once, and its file from a running
// sandbox; commands already running keep what they were given.
func (s *Service) SetSecrets(ctx context.Context, ref string, grants []SecretGrant) (*Sandbox, error) {
	if err := ValidateGrants(grants); err != nil {
		return nil, err
	}
	if err := s.checkSecretsExist(ctx, grants); err != nil {
		return nil, err
	}
	sb, unlock, err := s.lockSandbox(ctx, ref)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := require(sb, "grant secrets to", StateRunning, StatePaused, StateStopped, StateHibernated, StateError); err != nil {
		return nil, err
	}
	old := sb.Spec.Secrets
	sb.Spec.SecretsGranted = sb.Spec.secretsEver() || len(grants) > 0
	sb.Spec.Secrets = grants
	if err := s.record(ctx, sb, EventSecrets, "secrets: "+secretNames(grants)); err != nil {
		return nil, err
	}
	if sb.State == StateRunning {
		kept := map[string]bool{}
		for _, g := range grants {
			kept[g.File] = true
		}
		var gone []string
		for _, g := range old {
			if g.File != "" && !kept[g.File] {
				gone = append(gone, g.File)
			}
		}
		s.removeSecretFiles(ctx, sb, gone)
	}
	return sb, nil
}

// removeSecretFiles deletes secret files from a running sandbox's
// in-memory mount.
func (s *Service) removeSecretFiles(ctx context.Context, sb *Sandbox, names []string) {
	g := s.guestFor(sb)
	for _, n := range names {
		if err := g.Remove(ctx, path.Join(guest.SecretDir, n), false); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			s.log.Warn("removing a secret file", "sandbox", sb.Name, "file", n, "err", err)
		}
	}
}

// minRedact is the shortest secret value masked in output: shorter ones
// would mask ordinary text and give away little.
const minRedact = 4

// redactions copies the values a run's output is masked for.
func redactions(secrets []guest.Secret) [][]byte {
	var out [][]byte
	for _, sec := range secrets {
		if len(sec.Value) >= minRedact {
			out = append(out, bytes.Clone(sec.Value))
		}
	}
	return out
}

// masker masks the secret values a run was given in its two output
// streams, also a value a process wrote in pieces: the end of what came so
// far that could begin a value is held back until the next piece, or the
// run's end, shows whether it does. Offsets stay true (a value becomes as
// many '*'), so a stream resumed from what the host has is resumed from
// before the held-back end (reset). A nil masker passes output through.
type masker struct {
	values [][]byte
	carry  [2][]byte // per stream: the held-back end, not yet on the host
}

func newMasker(secrets []guest.Secret) *masker {
	values := redactions(secrets)
	if len(values) == 0 {
		return nil
	}
	return &masker{values: values}
}

// mask returns what of p (the next output of stream i) may go to the
// host, masked.
func (m *masker) mask(i int, p []byte) []byte {
	if m == nil {
		return p
	}
	if c := m.carry[i]; len(c) > 0 {
		p, m.carry[i] = append(c, p...), nil
	}
	p = mask(p, m.values)
	if k := m.pending(p); k > 0 {
		m.carry[i] = bytes.Clone(p[len(p)-k:])
		p = p[:len(p)-k]
	}
	return p
}

// pending is the length of the longest end of p that begins a value
// without completing it.
func (m *masker) pending(p []byte) int {
	best := 0
	for _, v := range m.values {
		from := max(len(p)-(len(v)-1), 0)
		for j := from; j < len(p)-best; j++ {
			k := bytes.IndexByte(p[j:len(p)-best], v[0])
			if k < 0 {
				break
			}
			j += k
			if bytes.HasPrefix(v, p[j:]) {
				best = len(p) - j
				break
			}
		}
	}
	return best
}

// reset drops what was held back: the stream restarts from before it.
func (m *masker) reset() {
	if m != nil {
		m.carry = [2][]byte{}
	}
}

// flush returns what stream i held back, once its output is complete: a
// beginning of a value that was never finished, passed as it is.
func (m *masker) flush(i int) []byte {
	if m == nil {
		return nil
	}
	c := m.carry[i]
	m.carry[i] = nil
	return c
}

// mask replaces every occurrence of a secret value in p with as many '*'
// (the same length, so output offsets stay true), copying p first if it
// holds any.
func mask(p []byte, secrets [][]byte) []byte {
	copied := false
	for _, v := range secrets {
		for i := bytes.Index(p, v); i >= 0; {
			if !copied {
				p, copied = bytes.Clone(p), true
			}
			for j := range v {
				p[i+j] = '*'
			}
			next := bytes.Index(p[i+len(v):], v)
			if next < 0 {
				break
			}
			i += len(v) + next
		}
	}
	return p
}
