package runsc

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// fakeEngine answers calls on a control socket as an engine does, and
// tells what it was asked and whether the mark was there when it was.
type fakeEngine struct {
	// answer is the engine's answer to each call; nil: none, the call
	// hangs (a pause stopping tasks on a busy host).
	answer *controlAnswer
	calls  chan engineCall
}

type engineCall struct {
	method, mark string
}

func (e *fakeEngine) serve(t *testing.T, ln net.Listener, mark string) {
	for {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		var c controlCall
		if err := json.NewDecoder(conn).Decode(&c); err != nil {
			t.Errorf("engine reading a call: %v", err)
		}
		b, _ := os.ReadFile(mark)
		e.calls <- engineCall{method: c.Method, mark: string(b)}
		if e.answer != nil {
			json.NewEncoder(conn).Encode(e.answer)
			conn.Close()
		} else {
			go func() { io.Copy(io.Discard, conn); conn.Close() }()
		}
	}
}

// unsettledRig is a Runtime with one instance "in", recorded status,
// whose engine answers with answer.
func unsettledRig(t *testing.T, status string, answer *controlAnswer) (*Runtime, *fakeEngine) {
	dir := t.TempDir()
	r := &Runtime{cfg: Config{Root: filepath.Join(dir, "root"), BundleDir: filepath.Join(dir, "bundles")}, log: slog.New(slog.DiscardHandler)}
	for _, d := range []string{r.cfg.Root, filepath.Join(r.cfg.BundleDir, "in")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	sock := filepath.Join(dir, "ctl.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	e := &fakeEngine{answer: answer, calls: make(chan engineCall, 8)}
	go e.serve(t, ln, r.markFile("in"))
	sf := r.stateFile("in")
	rec := `{"id":"in","status":"` + status + `","sandbox":{"pid":0,"controlSocketPath":"` + sock + `"}}`
	if err := os.WriteFile(sf.path, []byte(rec), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(sf.lock, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	return r, e
}

func (r *Runtime) wantRecord(t *testing.T, status, mark string) {
	t.Helper()
	rec, err := r.stateFile("in").read(context.Background())
	if err != nil || rec.Status != status {
		t.Errorf("record says %q (%v), want %q", rec.Status, err, status)
	}
	if m, err := r.marked("in"); err != nil || m != mark {
		t.Errorf("mark says %q (%v), want %q", m, err, mark)
	}
}

// A pause or resume is marked under way while the engine has it, and the
// mark goes once its end is in the record or it surely did nothing; one
// the engine took but never answered leaves the record as it was and the
// mark in place.
func TestPauseMark(t *testing.T) {
	ok, refused := &controlAnswer{Success: true}, &controlAnswer{Err: "no"}
	for _, tc := range []struct {
		name           string
		pause          bool
		answer         *controlAnswer
		wantErr        bool
		status, wantSt string
		wantMark       string
	}{
		{name: "pause answered", pause: true, answer: ok, status: "running", wantSt: "paused"},
		{name: "pause refused", pause: true, answer: refused, wantErr: true, status: "running", wantSt: "running"},
		{name: "pause unanswered", pause: true, wantErr: true, status: "running", wantSt: "running", wantMark: verbPause},
		{name: "resume answered", answer: ok, status: "paused", wantSt: "running"},
		{name: "resume unanswered", wantErr: true, status: "paused", wantSt: "paused", wantMark: verbResume},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, e := unsettledRig(t, tc.status, tc.answer)
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			err := r.setPaused(ctx, "in", tc.pause)
			if (err != nil) != tc.wantErr {
				t.Fatalf("setPaused: %v, want an error: %v", err, tc.wantErr)
			}
			c := <-e.calls
			verb := map[bool]string{true: verbPause, false: verbResume}[tc.pause]
			if c.mark != verb+"\n" {
				t.Errorf("the engine got %s with the mark saying %q, want %q", c.method, c.mark, verb)
			}
			r.wantRecord(t, tc.wantSt, tc.wantMark)
		})
	}
	t.Run("engine gone", func(t *testing.T) {
		r, _ := unsettledRig(t, "running", ok)
		os.Remove(filepath.Join(filepath.Dir(r.cfg.Root), "ctl.sock"))
		if err := r.setPaused(context.Background(), "in", true); err == nil {
			t.Fatal("pausing with no engine to call succeeded")
		}
		r.wantRecord(t, "running", "")
	})
}

// The next dend learns of a pause left unsettled and resumes the engine
// once, the record left running; of a resume left unsettled it records
// the instance running without a call. Neither is done twice.
func TestSettleUnsettled(t *testing.T) {
	ctx := context.Background()
	t.Run("pause", func(t *testing.T) {
		r, e := cutShort(t, "running", true)
		if yes, err := r.UnsettledPause(ctx, "in"); err != nil || !yes {
			t.Fatalf("UnsettledPause = %v, %v; want true", yes, err)
		}
		if yes, _ := r.UnsettledResume(ctx, "in"); yes {
			t.Fatal("UnsettledResume says yes after a pause")
		}
		e.answer = &controlAnswer{Success: true}
		if err := r.ResumeUnrecorded(ctx, "in"); err != nil {
			t.Fatal(err)
		}
		if c := <-e.calls; c.method != "containerManager.Resume" {
			t.Fatalf("the engine was asked %s, want a resume", c.method)
		}
		r.wantRecord(t, "running", "")
		if err := r.ResumeUnrecorded(ctx, "in"); err == nil {
			t.Fatal("a second ResumeUnrecorded succeeded")
		}
		if len(e.calls) > 0 {
			t.Fatal("a second ResumeUnrecorded reached the engine")
		}
	})
	t.Run("resume", func(t *testing.T) {
		r, e := cutShort(t, "paused", false)
		if yes, err := r.UnsettledResume(ctx, "in"); err != nil || !yes {
			t.Fatalf("UnsettledResume = %v, %v; want true", yes, err)
		}
		if yes, _ := r.UnsettledPause(ctx, "in"); yes {
			t.Fatal("UnsettledPause says yes after a resume")
		}
		if err := r.RecordResumed(ctx, "in"); err != nil {
			t.Fatal(err)
		}
		r.wantRecord(t, "running", "")
		if len(e.calls) > 0 {
			t.Fatal("RecordResumed called the engine")
		}
		if err := r.RecordResumed(ctx, "in"); err == nil {
			t.Fatal("a second RecordResumed succeeded")
		}
	})
}

// cutShort returns a rig whose instance, recorded status, had a pause (or
// a resume) taken by its engine and never answered, as a dend killed
// during the call leaves it.
func cutShort(t *testing.T, status string, pause bool) (*Runtime, *fakeEngine) {
	t.Helper()
	r, e := unsettledRig(t, status, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := r.setPaused(ctx, "in", pause); err == nil {
		t.Fatal("an unanswered call succeeded")
	}
	<-e.calls
	return r, e
}
