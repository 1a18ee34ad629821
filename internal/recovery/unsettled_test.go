package recovery

import (
	"context"
	"errors"
	"testing"

	"github.com/den-dev/den/internal/sandbox"
)

// kernel is an engine with one instance whose kernel is stopped or not,
// and whose record and mark say what a killed dend left; any other call
// panics. A resume of a kernel it did not stop kills it, as gVisor's does.
type kernel struct {
	sandbox.Runtime
	stopped, dead    bool
	pauseMarked      bool // a pause was left unsettled, recorded running
	resumeMarked     bool // a resume was left unsettled, recorded paused
	recordedRunning  bool
	resumes, records int
}

func (k *kernel) UnsettledPause(ctx context.Context, id string) (bool, error) {
	return k.pauseMarked, nil
}

func (k *kernel) UnsettledResume(ctx context.Context, id string) (bool, error) {
	return k.resumeMarked, nil
}

func (k *kernel) ResumeUnrecorded(ctx context.Context, id string) error {
	if !k.pauseMarked {
		return errors.New("no pause under way")
	}
	k.pauseMarked = false
	k.resumes++
	if !k.stopped {
		k.dead = true
		return errors.New("the engine's connection broke")
	}
	k.stopped = false
	return nil
}

func (k *kernel) RecordResumed(ctx context.Context, id string) error {
	k.resumeMarked = false
	k.records++
	k.recordedRunning = true
	return nil
}

// answers is den-init: it answers while the kernel runs.
func (k *kernel) answers() bool { return !k.stopped && !k.dead }

// An instance recorded running whose den-init is silent is resumed once
// when a pause was cut short with dend, and lives on when the pause had
// happened; without the mark, nothing is asked of the engine.
func TestThawUnsettled(t *testing.T) {
	for _, tc := range []struct {
		name        string
		marked      bool
		stopped     bool
		wantAnswers bool
		wantResumes int
	}{
		{name: "paused, unrecorded", marked: true, stopped: true, wantAnswers: true, wantResumes: 1},
		// The pause never reached the kernel: the resume kills it, and
		// it is lost as it would have been anyway.
		{name: "not paused after all", marked: true, stopped: false, wantAnswers: false, wantResumes: 1},
		{name: "no mark", marked: false, stopped: true, wantAnswers: false, wantResumes: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := &kernel{pauseMarked: tc.marked, stopped: tc.stopped}
			if !tc.stopped {
				k.dead = true // den-init is silent for another reason
			}
			r := New(Config{Runtime: k})
			pings := 0
			ping := func(context.Context) (bool, error) { pings++; return k.answers(), nil }
			got, err := r.thawUnsettled(context.Background(), &sandbox.Sandbox{ID: "sb", Name: "web", Generation: 1}, ping)
			if err != nil || got != tc.wantAnswers {
				t.Fatalf("thawUnsettled = %v, %v; want %v", got, err, tc.wantAnswers)
			}
			if k.resumes != tc.wantResumes {
				t.Errorf("the engine was resumed %d times, want %d", k.resumes, tc.wantResumes)
			}
			if pings != tc.wantResumes {
				t.Errorf("den-init was asked %d times after the resume, want %d", pings, tc.wantResumes)
			}
		})
	}
}

// An instance recorded paused with a resume cut short is recorded
// running when den-init answers (the resume happened), and stays paused
// for the usual resume otherwise.
func TestSettleResume(t *testing.T) {
	for _, tc := range []struct {
		name    string
		marked  bool
		stopped bool
		st      sandbox.InstanceState
		want    sandbox.InstanceState
	}{
		{name: "resumed, unrecorded", marked: true, stopped: false, st: sandbox.InstancePaused, want: sandbox.InstanceRunning},
		{name: "never resumed", marked: true, stopped: true, st: sandbox.InstancePaused, want: sandbox.InstancePaused},
		{name: "no mark", marked: false, stopped: false, st: sandbox.InstancePaused, want: sandbox.InstancePaused},
		{name: "recorded running", marked: true, stopped: false, st: sandbox.InstanceRunning, want: sandbox.InstanceRunning},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := &kernel{resumeMarked: tc.marked, stopped: tc.stopped}
			r := New(Config{Runtime: k})
			asked := false
			answers := func(context.Context) bool { asked = true; return k.answers() }
			got := r.settleResume(context.Background(), &sandbox.Sandbox{ID: "sb", Name: "web", Generation: 1}, tc.st, answers)
			if got != tc.want {
				t.Fatalf("settleResume = %s, want %s", got, tc.want)
			}
			if k.recordedRunning != (tc.want == sandbox.InstanceRunning && tc.st == sandbox.InstancePaused) {
				t.Errorf("recorded running: %v", k.recordedRunning)
			}
			if asked != (tc.marked && tc.st == sandbox.InstancePaused) {
				t.Errorf("den-init asked: %v", asked)
			}
			if k.resumes != 0 {
				t.Error("settleResume resumed the engine")
			}
		})
	}
}
