package integration

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/den-dev/den/api"
)

// A long pause is invisible to the guest's programs but for the time it
// took: its clock is the host's when it resumes, a timer that fell due
// during the freeze fires at once and none fires twice, periodic timers
// carry on at their pace, and a TCP connection open across it carries
// data on.
func TestLongFreeze(t *testing.T) {
	const freeze = 8 * time.Second
	d := startDend(t)
	sb := d.create("ice")
	ctx := ctxT(t, 2*time.Minute)
	detached := func(script string) {
		t.Helper()
		if _, err := d.c.ExecDetached(ctx, "ice", api.ExecRequest{Argv: []string{"sh", "-c", script}}); err != nil {
			t.Fatal(err)
		}
	}
	// A periodic timer, a one-shot timer due in the middle of the freeze,
	// and a connection that sends a line before it and one after. (nc
	// ends its connection at the end of its input: the sleeps keep it.)
	detached(`while :; do date +%s >> /root/ticks; sleep 1; done`)
	detached(`sleep 600 | nc -l -p 9000 > /root/received`)
	waitFor(t, 30*time.Second, "nc to listen", func() bool {
		out, _, _ := d.sh("ice", "netstat -ltn")
		return strings.Contains(out, ":9000")
	})
	detached(`(echo before; sleep 6; echo after; sleep 600) | nc 127.0.0.1 9000`)
	waitFor(t, 30*time.Second, "the first line across the connection", func() bool {
		out, _, _ := d.sh("ice", "cat /root/received")
		return out == "before\n"
	})
	detached(`sleep 3; date +%s > /root/woke`)
	time.Sleep(500 * time.Millisecond)

	if _, err := d.c.Pause(ctx, "ice"); err != nil {
		t.Fatal(err)
	}
	if got := d.engineState(instanceOf(sb)); got != "paused" {
		t.Fatalf("runsc says the paused sandbox is %q", got)
	}
	pausedAt := time.Now()
	time.Sleep(freeze)
	if _, err := d.c.Resume(ctx, "ice"); err != nil {
		t.Fatal(err)
	}
	resumed := time.Now()
	if got := d.engineState(instanceOf(sb)); got != "running" {
		t.Fatalf("runsc says the resumed sandbox is %q", got)
	}

	var received string
	defer func() {
		if t.Failed() {
			out, _, _ := d.sh("ice", "ps; netstat -tn")
			t.Logf("received %q; in the sandbox:\n%s", received, out)
		}
	}()
	waitFor(t, 30*time.Second, "the second line across the connection", func() bool {
		received, _, _ = d.sh("ice", "cat /root/received")
		return received == "before\nafter\n"
	})
	guestNow := unixSeconds(t, d.mustSh("ice", "date +%s"))
	if diff := guestNow - time.Now().Unix(); diff < -2 || diff > 2 {
		t.Errorf("the guest's clock is %ds off the host's after the freeze", diff)
	}
	woke := unixSeconds(t, d.mustSh("ice", "cat /root/woke"))
	if woke < pausedAt.Add(freeze).Unix()-1 || woke > resumed.Unix()+2 {
		t.Errorf("a timer due during the freeze fired at %s; paused %s, resumed %s",
			time.Unix(woke, 0).Format(time.TimeOnly), pausedAt.Format(time.TimeOnly), resumed.Format(time.TimeOnly))
	}

	time.Sleep(3 * time.Second)
	var ticks []int64
	for _, l := range strings.Fields(d.mustSh("ice", "cat /root/ticks")) {
		ticks = append(ticks, unixSeconds(t, l))
	}
	var after []int64
	gap := int64(0)
	for i := 1; i < len(ticks); i++ {
		if g := ticks[i] - ticks[i-1]; g > gap {
			gap, after = g, ticks[i:]
		}
	}
	since := time.Now().Unix() - resumed.Unix()
	t.Logf("freeze %v; longest gap between ticks %ds; %d ticks in the %ds since", freeze, gap, len(after), since)
	if gap < int64(freeze/time.Second)-2 {
		t.Errorf("the periodic timer ticked during the freeze: longest gap %ds (ticks %v)", gap, ticks)
	}
	if len(after) < 2 || int64(len(after)) > since+2 {
		t.Errorf("%d ticks in the %ds after the freeze (ticks %v): the timer stalled or caught up in a burst", len(after), since, ticks)
	}
}

func unixSeconds(t *testing.T, s string) int64 {
	t.Helper()
	v, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil {
		t.Fatalf("not a time in seconds: %q", s)
	}
	return v
}
