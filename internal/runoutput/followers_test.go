package runoutput

import (
	"errors"
	"strings"
	"testing"

	"github.com/den-dev/den/internal/errdefs"
)

func TestFollowersEndSaysHowToTakeUpAgain(t *testing.T) {
	var fs Followers
	logs, unfollowLogs := fs.Follow("sb1", "r1", false)
	defer unfollowLogs()
	shell, unfollowShell := fs.Follow("sb1", "r2", true)
	defer unfollowShell()
	other, unfollowOther := fs.Follow("sb2", "r3", false)
	defer unfollowOther()
	if logs.Err() != nil {
		t.Fatalf("a follower not stopped has error %v", logs.Err())
	}
	fs.End("sb1", "box", "paused")
	for _, tc := range []struct {
		f    *Follower
		want string
	}{{logs, "den logs box r1 -f"}, {shell, "den shell box"}} {
		select {
		case <-tc.f.Stopped():
		default:
			t.Fatalf("follower of %s not stopped", tc.f.runID)
		}
		if err := tc.f.Err(); err == nil || !strings.Contains(err.Error(), `sandbox "box" was paused while run `+tc.f.runID) {
			t.Errorf("follower of %s: %v", tc.f.runID, err)
		}
		if hint := errdefs.Hint(tc.f.Err()); !strings.Contains(hint, tc.want) {
			t.Errorf("follower of %s: hint %q, want it to name %q", tc.f.runID, hint, tc.want)
		}
		if !errors.Is(tc.f.Err(), errdefs.ErrConflict) {
			t.Errorf("follower of %s: %v is not a conflict", tc.f.runID, tc.f.Err())
		}
	}
	select {
	case <-other.Stopped():
		t.Error("a follower of another sandbox was stopped")
	default:
	}
}
