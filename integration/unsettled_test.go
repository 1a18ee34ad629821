package integration

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/den-dev/den/api"
)

// A dend killed while the engine has its pause call in hand, the call not
// yet answered (the engine frozen with SIGSTOP, as a pause stopping tasks
// on a busy host takes seconds): the engine pauses after dend died, with
// runsc's record still saying it runs. The next dend finds den-init
// silent, resumes the instance once (den marked the pause under way),
// and the sandbox runs on with its files and processes, where it used to
// be recorded lost.
func TestDendKilledWhilePausing(t *testing.T) {
	d := startDend(t)
	d.create("pw")
	d.mustSh("pw", "echo pw > /root/mark")
	insts := d.instances()
	if len(insts) != 1 {
		t.Fatalf("instances: %v, want one", insts)
	}
	engine := d.enginePid(insts[0])
	if err := syscall.Kill(engine, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	thawed := false
	thaw := func() {
		if !thawed {
			thawed = true
			syscall.Kill(engine, syscall.SIGCONT)
		}
	}
	defer thaw()

	done := make(chan error, 1)
	go func() {
		_, err := d.c.Pause(ctxT(t, time.Minute), "pw")
		done <- err
	}()
	time.Sleep(2 * time.Second) // the call sent, its answer awaited
	select {
	case err := <-done:
		t.Fatalf("the pause ended with the engine frozen (%v): it never reached the engine", err)
	default:
	}
	d.kill()
	thaw() // the engine reads the call now and pauses, unrecorded

	d.start()
	if got := d.stateNow("pw"); got != api.StateRunning {
		t.Fatalf("pw is %q after dend restarted, want running\n%s", got, d.logs())
	}
	markIs(t, d, "pw", "pw")
	if logs := d.logs(); !strings.Contains(logs, "resuming the instance once") {
		t.Errorf("dend did not say it resumed the instance a pause left stopped:\n%s", logs)
	}
	if got := d.instances(); len(got) != 1 || got[0] != insts[0] {
		t.Fatalf("instances after recovery: %v, want %v", got, insts)
	}
}
