package specs

import (
	"fmt"
	"slices"
	"strings"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/fspath"
)

// Setup steps and kept paths: the shell commands a sandbox runs once
// when it is created and again after each rebase, and the paths a rebase
// carries over from the old root.

// Limits on setup steps and kept paths.
const (
	MaxSetupSteps    = 32
	MaxSetupStepSize = 16 << 10
	MaxKeepPaths     = 32
)

// ValidateSetup checks setup steps and kept paths as a user gives them.
func ValidateSetup(steps, keep []string) error {
	if err := ValidateSteps("setup step", steps, "--setup 'apt-get install -y git'"); err != nil {
		return err
	}
	if len(keep) > MaxKeepPaths {
		return errdefs.Invalid("%d kept paths; at most %d are allowed", len(keep), MaxKeepPaths)
	}
	for _, p := range keep {
		if err := ValidateKeptPath("kept path", "--keep-path /opt/data", p); err != nil {
			return err
		}
	}
	return nil
}

// ValidateSteps checks shell steps of a kind ("setup step"); example is
// the flag that gives one, for a hint.
func ValidateSteps(kind string, steps []string, example string) error {
	if len(steps) > MaxSetupSteps {
		return errdefs.Invalid("%d %ss; at most %d are allowed", len(steps), kind, MaxSetupSteps)
	}
	for i, st := range steps {
		switch {
		case strings.TrimSpace(st) == "":
			return errdefs.WithHint(errdefs.Invalid("%s %d is empty", kind, i+1), "give each step a shell command, e.g. "+example)
		case len(st) > MaxSetupStepSize:
			return errdefs.Invalid("%s %d is %d bytes, over the %d limit", kind, i+1, len(st), MaxSetupStepSize)
		case strings.ContainsRune(st, 0):
			return errdefs.Invalid("%s %d contains a NUL byte", kind, i+1)
		}
	}
	return nil
}

// ValidateKeptPath checks p, a path a rebase carries over, of a kind
// ("kept path"); example is the flag that gives one, for a hint.
func ValidateKeptPath(kind, example, p string) error {
	c, err := fspath.Clean(p)
	if err != nil {
		return errdefs.WithHint(fmt.Errorf("%s: %w", kind, err), "name "+kind+"s as absolute paths inside the sandbox, e.g. "+example)
	}
	if c != p {
		return errdefs.WithHint(errdefs.Invalid("%s %q is not in its plain form", kind, p), fmt.Sprintf("write it as %q", c))
	}
	if c == "/" || isSystemPath(c) {
		return errdefs.WithHint(errdefs.Invalid("%s %q would carry the old system over the new image", kind, p),
			"keep your own data directories, e.g. /opt/data or /var/lib/app; the new image brings the system")
	}
	if c == "/run" || strings.HasPrefix(c, "/run/") {
		return errdefs.WithHint(errdefs.Invalid("%s %q is under /run, which each boot fills afresh (den puts granted secrets in /run/secrets)", kind, p),
			"keep your own data directories, e.g. /opt/data or /var/lib/app; secrets come back with their grants")
	}
	if slices.Contains(accountFiles, c) {
		return errdefs.WithHint(errdefs.Invalid("%s %q is one of the system's account files, which must match the new image's", kind, p),
			"add users with a setup step instead, e.g. --step 'useradd -m dev'")
	}
	return nil
}

// accountFiles say who the users are and what they may do: the new
// image's must stay, consistent with each other and with its files.
var accountFiles = []string{"/etc/passwd", "/etc/shadow", "/etc/group", "/etc/gshadow",
	"/etc/subuid", "/etc/subgid", "/etc/sudoers", "/etc/sudoers.d"}

// isSystemPath reports whether p is one of the directories a new image
// must bring itself, or the mounts the engine makes.
func isSystemPath(p string) bool {
	for _, d := range []string{"/bin", "/sbin", "/lib", "/lib64", "/lib32", "/usr", "/etc", "/proc", "/sys", "/dev", "/var", "/tmp", "/run", "/boot"} {
		if p == d {
			return true
		}
	}
	return p == "/.den" || strings.HasPrefix(p, "/.den/") || strings.HasPrefix(p, "/proc/") || strings.HasPrefix(p, "/sys/") || strings.HasPrefix(p, "/dev/")
}
