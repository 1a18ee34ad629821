package cli

import (
	"context"
	"fmt"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	denversion "github.com/den-dev/den/internal/version"
)

// ClientVersion is den's release: as stamped at build time, else as
// the build info names it, else "dev".
func (a *App) ClientVersion() string {
	if a.Version != "" {
		return a.Version
	}
	// What `make build` stamps on both den and dend.
	if denversion.Version != "dev" {
		return denversion.Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

// skew is what den heard of dend's release in this invocation.
type skew struct {
	mu     sync.Mutex
	server string // "" until an answer named it
	warned bool
}

// HeardServer records the release dend named and, the first time it
// differs from den's, warns on stderr (never on stdout, which --json
// keeps for the answer).
func (a *App) HeardServer(server string) {
	a.skew.mu.Lock()
	defer a.skew.mu.Unlock()
	a.skew.server = server
	if a.skew.warned || server == a.ClientVersion() {
		return
	}
	a.skew.warned = true
	fmt.Fprintln(a.Stderr, "den: warning: "+skewWarning(a.ClientVersion(), server))
}

// ServerVersion is the release dend named, or "".
func (a *App) ServerVersion() string {
	a.skew.mu.Lock()
	defer a.skew.mu.Unlock()
	return a.skew.server
}

// skewWarning says that den and dend come of different releases, and
// which calls may fail for it.
func skewWarning(den, dend string) string {
	head := "den is " + den + " but dend is " + dend
	switch order, ok := compareReleases(den, dend); {
	case !ok:
		return head + ": calls one knows and the other does not will fail; install den and dend from one release"
	case order > 0:
		return head + ": calls added since " + dend + " will fail until dend is upgraded"
	default:
		return head + ": this den lacks dend's calls added since " + den + "; upgrade den"
	}
}

// release is a version as `git describe` names it: vMAJOR.MINOR.PATCH,
// then -N-gHASH for N commits past that tag, then -dirty.
type release struct {
	tag   [3]int
	ahead int
}

func parseRelease(v string) (release, bool) {
	var r release
	rest, ok := strings.CutPrefix(v, "v")
	if !ok {
		return r, false
	}
	rest = strings.TrimSuffix(rest, "-dirty")
	tag, past, _ := strings.Cut(rest, "-")
	nums := strings.Split(tag, ".")
	if len(nums) != 3 {
		return r, false
	}
	for i, n := range nums {
		x, err := strconv.Atoi(n)
		if err != nil || x < 0 {
			return r, false
		}
		r.tag[i] = x
	}
	if past != "" {
		n, hash, ok := strings.Cut(past, "-")
		x, err := strconv.Atoi(n)
		if !ok || err != nil || !strings.HasPrefix(hash, "g") {
			return r, false
		}
		r.ahead = x
	}
	return r, true
}

// compareReleases orders two releases: negative when a is older than b,
// positive when newer. ok is false when either is no release (a "dev"
// build) or they cannot be ordered (two builds of one commit count).
func compareReleases(a, b string) (order int, ok bool) {
	ra, okA := parseRelease(a)
	rb, okB := parseRelease(b)
	if !okA || !okB {
		return 0, false
	}
	for i := range ra.tag {
		if ra.tag[i] != rb.tag[i] {
			return ra.tag[i] - rb.tag[i], true
		}
	}
	if ra.ahead == rb.ahead {
		return 0, false
	}
	return ra.ahead - rb.ahead, true
}

// UnknownCall turns dend's answer to a call it does not have into what
// happened: dend is of an older release than den.
func (a *App) UnknownCall(ctx context.Context, err error) error {
	server := a.ServerVersion()
	if server == "" { // a dend of v0.1.0 names its release only here
		if c, cerr := a.Client(); cerr == nil {
			hctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			if h, herr := c.Health(hctx); herr == nil {
				server = h.Version
			}
			cancel()
		}
	}
	if server == a.ClientVersion() {
		return err // one release: a bug, and dend's own words say more
	}
	if server == "" {
		server = "(of an unknown release)"
	}
	return WithHint(fmt.Errorf("dend %s does not know this call; upgrade dend", server),
		fmt.Sprintf("den is %s; dend answered %q. Upgrade dend to den's release, or use the den of dend's", a.ClientVersion(), err))
}
