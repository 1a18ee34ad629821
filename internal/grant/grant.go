// Package grant provides what follows a secret once it is granted to a
// sandbox: the grants themselves (checked, named for history), the values
// a command is given at exec time, the masking of those values in its
// output, what is known, per instance, of the processes that may still
// hold them and what they may have left in memory (cleared before that
// memory is saved), and the sealing of the memory images of sandboxes
// ever granted one (Seal, Open, through a Sealer).
//
// It never imports internal/sandbox: it knows instances by id, den-init
// through the small Guest it declares, images by directory, and nothing
// of sandboxes' states, records or checkpoints. It keeps no secret value
// beyond the call that needs it; the secrets themselves are
// internal/secret's, and the images key is the Sealer's.
package grant

import (
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

// Grant gives a sandbox's commands one secret, at exec time: in the
// environment variable Env (by default the secret's name), or as the file
// File in guest.SecretDir, an in-memory mount. Only the grant is kept in
// the spec, never the value.
type Grant struct {
	Name string `json:"name"`
	Env  string `json:"env,omitempty"`
	File string `json:"file,omitempty"`
}

// Max bounds the grants of one sandbox.
const Max = guest.MaxSecrets

var (
	secretNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)
	fileNameRE   = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$`)
	envNameRE    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// ValidateName checks a secret's name: an environment variable's.
func ValidateName(name string) error {
	if secretNameRE.MatchString(name) {
		return nil
	}
	return errdefs.WithHint(errdefs.Invalid("invalid secret name %q", name),
		"use 1-64 letters, digits and underscores, not starting with a digit, like an environment variable: DB_PASSWORD")
}

// Validate checks grants and fills in defaults: a grant with neither a
// variable nor a file goes to the variable of its name.
func Validate(grants []Grant) error {
	if len(grants) > Max {
		return errdefs.TooLarge("%d secret grants, over the limit of %d", len(grants), Max)
	}
	targets := map[string]bool{}
	for i := range grants {
		g := &grants[i]
		if err := ValidateName(g.Name); err != nil {
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
		} else if !envNameRE.MatchString(g.Env) {
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

// Names lists the names of grants, for history.
func Names(grants []Grant) string {
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

// FilesGone lists the secret files of old grants that new ones no longer
// make: a running sandbox's are removed at once.
func FilesGone(old, new []Grant) []string {
	kept := map[string]bool{}
	for _, g := range new {
		kept[g.File] = true
	}
	var gone []string
	for _, g := range old {
		if g.File != "" && !kept[g.File] {
			gone = append(gone, g.File)
		}
	}
	return gone
}

// Revealer gives a secret's value: the sandbox service's Secrets port.
type Revealer interface {
	// Reveal returns the named secret's value; ErrNotFound when there is
	// no such secret.
	Reveal(ctx context.Context, name string) ([]byte, error)
}

// CheckSet refuses grants of secrets that are not set, so a create or
// grant cannot succeed into execs that all fail. A nil r keeps no
// secrets.
func CheckSet(ctx context.Context, r Revealer, grants []Grant) error {
	for _, g := range grants {
		if r == nil {
			return errdefs.Unavailable("this dend keeps no secrets")
		}
		v, err := r.Reveal(ctx, g.Name)
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

// Reveal fetches the values a command of the sandbox named sandbox gets
// from its grants. The caller wipes them once sent.
func Reveal(ctx context.Context, r Revealer, sandbox string, grants []Grant) ([]guest.Secret, error) {
	var out []guest.Secret
	for _, g := range grants {
		if r == nil {
			return nil, errdefs.Unavailable("this dend keeps no secrets")
		}
		v, err := r.Reveal(ctx, g.Name)
		if errors.Is(err, errdefs.ErrNotFound) {
			Wipe(out)
			return nil, errdefs.WithHint(errdefs.NotFound("secret %s granted to sandbox %s is no longer set", g.Name, sandbox),
				fmt.Sprintf("set it again, or revoke it: `den secret revoke %s %s`", sandbox, g.Name))
		}
		if err != nil {
			Wipe(out)
			return nil, fmt.Errorf("reading secret %s: %w", g.Name, err)
		}
		sec := guest.Secret{Env: g.Env, Value: v}
		if g.File != "" {
			sec = guest.Secret{File: FilePath(g.File), Value: v}
		}
		out = append(out, sec)
	}
	return out, nil
}

// FilePath is where the secret file named name is made in a sandbox.
func FilePath(name string) string { return path.Join(guest.SecretDir, name) }

// Wipe clears the values of secrets.
func Wipe(secrets []guest.Secret) {
	for _, sec := range secrets {
		clear(sec.Value)
	}
}
