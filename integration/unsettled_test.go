package integration

import (
	"context"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

// A dend killed while the engine has its pause or resume call in hand,
// the call not yet answered (the engine frozen with SIGSTOP, as a pause
// stopping tasks on a busy host takes seconds): the engine does it after
// dend died, and runsc's record says otherwise. The next dend settles it
// by den's mark of the call: a pause it undoes (den-init is silent, so
// it resumes the instance once), a resume it records (den-init answers,
// and a second resume would kill the engine). Either way the sandbox
// runs on with its files, where it used to be lost.
func TestDendKilledWhilePausing(t *testing.T) {
	for _, tc := range []struct {
		verb   string
		before string // the sandbox's state before the call
		call   func(*client.Client, context.Context, string) (*api.Sandbox, error)
		log    string // what the next dend says it did
	}{
		{verb: "pause", before: api.StateRunning, call: (*client.Client).Pause, log: "resuming the instance once"},
		{verb: "resume", before: api.StatePaused, call: (*client.Client).Resume, log: "a resume cut short with dend did happen"},
	} {
		t.Run(tc.verb, func(t *testing.T) {
			d := startDend(t)
			d.create("pw")
			d.mustSh("pw", "echo pw > /root/mark")
			if tc.before == api.StatePaused {
				d.mustDen("", "pause", "pw")
			}
			insts := d.instances()
			if len(insts) != 1 {
				t.Fatalf("instances: %v, want one", insts)
			}
			thaw := freeze(t, d.enginePid(insts[0]))
			defer thaw()

			done := make(chan error, 1)
			go func() {
				_, err := tc.call(d.c, ctxT(t, time.Minute), "pw")
				done <- err
			}()
			time.Sleep(2 * time.Second) // the call sent, its answer awaited
			select {
			case err := <-done:
				t.Fatalf("the %s ended with the engine frozen (%v): it never reached the engine", tc.verb, err)
			default:
			}
			d.kill()
			thaw() // the engine reads the call now and does it, unrecorded

			d.start()
			if got := d.stateNow("pw"); got != api.StateRunning {
				t.Fatalf("pw is %q after dend restarted, want running\n%s", got, d.logs())
			}
			markIs(t, d, "pw", "pw")
			if logs := d.logs(); !strings.Contains(logs, tc.log) {
				t.Errorf("dend did not say %q:\n%s", tc.log, logs)
			}
			if got := d.instances(); len(got) != 1 || got[0] != insts[0] {
				t.Fatalf("instances after recovery: %v, want %v", got, insts)
			}
		})
	}
}

// freeze stops process pid with SIGSTOP and returns what continues it,
// once however often it is called.
func freeze(t *testing.T, pid int) (thaw func()) {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	return func() { once.Do(func() { syscall.Kill(pid, syscall.SIGCONT) }) }
}
