package sandbox

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/peers"
)

// deadView is what the engine says when a save finds a process holding a
// directory or file of a view that changed under it (a peer view
// refreshed or removed since it was opened): it keeps the dentry, which
// cannot be saved. The name is the view's path under peers.Root.
var deadView = regexp.MustCompile(`gofer\.dentry\("([^"]*)"\)\.prepareSaveDead: invalidated dentries can't be saved`)

// unsavable says, in words, why the engine refused to save sb's memory
// when a process holds a file of a view that changed since it opened
// it; any other err is returned as it is.
func unsavable(sb *Sandbox, err error) error {
	m := deadView.FindStringSubmatch(err.Error())
	if m == nil {
		return err
	}
	return errdefs.WithHint(
		errdefs.Conflict("cannot save the memory of sandbox %q: a process in it has its working directory or an open file in peer view %s, which was refreshed or removed since",
			sb.Name, viewAt(sb, m[1])),
		fmt.Sprintf("have that process leave the view (cd out of it, close the file) or end it, then try again; or stop and start it with `den stop %s && den start %s` (its processes end, its files stay)", sb.Name, sb.Name))
}

// viewAt is the mount point inside sb of the view the engine names by
// path, the path under peers.Root: a view placed elsewhere is found by
// its hidden name (peers.Inside).
func viewAt(sb *Sandbox, path string) string {
	inside := peers.Root + "/" + path
	for _, p := range sb.Spec.Peers {
		if in := peers.Inside(p.At); inside == in || strings.HasPrefix(inside, in+"/") {
			return p.At
		}
	}
	return inside
}

// saveFailed records on sb that a checkpoint or fork c could not save its
// memory, err saying why, and returns err. The engine was asked to leave
// the instance as it was, so the sandbox goes on as it was; a
// hibernation records its own failure (undoHibernate).
func (s *Service) saveFailed(ctx context.Context, sb *Sandbox, c capture, err error) error {
	if !c.leaveRunning {
		return err
	}
	what := "memory checkpoint"
	if c.kind == CheckpointFork {
		what = "fork"
	}
	msg := fmt.Sprintf("%s failed, still %s: %v", what, sb.State, err)
	if rerr := s.Record(context.WithoutCancel(ctx), sb, EventFailed, msg); rerr != nil {
		s.log.Error("recording a failed save", "sandbox", sb.Name, "err", rerr)
	}
	return err
}
