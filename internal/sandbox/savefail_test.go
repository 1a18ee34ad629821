package sandbox

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/peers"
)

func TestUnsavableNamesTheView(t *testing.T) {
	sb := &Sandbox{Name: "reader", Spec: Spec{Peers: []peers.Peer{{At: "/peers/coder"}, {At: "/review/base"}}}}
	engine := func(path string) error {
		return fmt.Errorf("saving memory: the engine refused containerManager.Checkpoint: gofer.dentry(%q).prepareSaveDead: invalidated dentries can't be saved", path)
	}
	for path, at := range map[string]string{
		"coder":     "/peers/coder",
		"coder/src": "/peers/coder/src",
		peers.HiddenDir + "/" + strings.TrimPrefix(peers.Inside("/review/base"), peers.Root+"/"+peers.HiddenDir+"/"): "/review/base",
	} {
		err := unsavable(sb, engine(path))
		if !errors.Is(err, errdefs.ErrConflict) || !strings.Contains(err.Error(), "peer view "+at+",") || !strings.Contains(errdefs.Hint(err), "den stop reader") {
			t.Errorf("%s: %v (hint %q); want a conflict naming %s", path, err, errdefs.Hint(err), at)
		}
	}
	other := errors.New("saving memory: no space left on device")
	if err := unsavable(sb, other); err != other {
		t.Errorf("another failure became %v", err)
	}
}
