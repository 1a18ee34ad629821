package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

// follower is a `den events -f` running in the background, its lines
// read as they come.
type follower struct {
	t     *testing.T
	lines chan string
	seen  []string
}

func (d *dend) follow(env []string, args ...string) *follower {
	d.t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "den"), append([]string{"events", "-f"}, args...)...)
	cmd.Env = append(os.Environ(), "DEN_SOCKET="+d.socket, "DEN_HOST=", "DEN_TOKEN=")
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		d.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		d.t.Fatal(err)
	}
	d.t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	f := &follower{t: d.t, lines: make(chan string, 1000)}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			f.lines <- sc.Text()
		}
		close(f.lines)
	}()
	return f
}

// await returns the next line holding every one of words, failing the
// test if none comes within a minute.
func (f *follower) await(words ...string) string {
	f.t.Helper()
	deadline := time.After(time.Minute)
	for {
		select {
		case line, ok := <-f.lines:
			if !ok {
				f.t.Fatalf("den events -f ended waiting for %q; it printed:\n%s", words, strings.Join(f.seen, "\n"))
			}
			f.seen = append(f.seen, line)
			all := true
			for _, w := range words {
				all = all && strings.Contains(line, w)
			}
			if all {
				return line
			}
		case <-deadline:
			f.t.Fatalf("no line with %q from den events -f; it printed:\n%s", words, strings.Join(f.seen, "\n"))
		}
	}
}

// The event stream: `den events -f` shows a pause and a resume as they
// happen, and runs starting and ending; a follower resumes from an id; an
// owner token sees only its own sandboxes' events; bad input is refused.
func TestEventsStream(t *testing.T) {
	addr := freeAddr(t)
	d := startDend(t, "--listen", addr)
	host := "http://" + addr
	ctx := ctxT(t, 5*time.Minute)

	d.create("s1")
	f := d.follow(nil, "--sandbox", "s1", "--after", "0")
	f.await("s1", "created")
	f.await("s1", "started")

	if _, err := d.c.Pause(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	paused := f.await("s1", "paused", "running→paused")
	// Only once the pause was seen: the follower is live, not replaying.
	if _, err := d.c.Resume(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	f.await("s1", "resumed", "paused→running")
	d.mustSh("s1", "echo hi")
	f.await("s1", "run.started", "sh -c echo hi")
	f.await("s1", "run.ended", "exited (exit 0)")

	// Resuming after the pause's id gives what came after, not the pause.
	pauseID := strings.Fields(paused)[1]
	out := d.mustDen("", "events", "--after", pauseID, "--sandbox", "s1", "--json")
	var types []string
	for line := range strings.Lines(out) {
		var ev api.StreamEvent
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("den events --json line %q: %v", line, err)
		}
		types = append(types, ev.Type)
	}
	if len(types) == 0 || types[0] != "resumed" || strings.Contains(strings.Join(types, " "), "paused") {
		t.Errorf("events after %s: %v, want resumed first and no pause", pauseID, types)
	}

	// An owner token sees its own sandbox's events and nobody else's.
	token := strings.TrimSpace(d.mustDen("", "token", "create", "alice", "--scope", "owner"))
	alice, err := client.New(client.WithHost(host, token))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alice.CreateSandbox(ctx, api.CreateSandboxRequest{Name: "a1", Image: "busybox", Memory: "256M"}); err != nil {
		t.Fatal(err)
	}
	aliceEnv := []string{"DEN_HOST=" + host, "DEN_TOKEN=" + token}
	fa := d.follow(aliceEnv, "--after", "0")
	fa.await("a1", "started")
	if _, err := d.c.Pause(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Pause(ctx, "a1"); err != nil {
		t.Fatal(err)
	}
	fa.await("a1", "paused")
	for _, line := range fa.seen {
		if strings.Contains(line, "s1") {
			t.Errorf("alice sees root's sandbox: %s", line)
		}
	}
	var mine []string
	err = alice.StreamEvents(ctx, client.EventsOptions{After: client.EventStartOldest}, func(ev api.StreamEvent) error {
		mine = append(mine, ev.Sandbox+":"+ev.Type)
		return nil
	})
	if err != nil || len(mine) == 0 || strings.Contains(strings.Join(mine, " "), "s1:") {
		t.Errorf("alice's events: %v, %v", mine, err)
	}

	// Bad input changes nothing and says what was wrong.
	if _, errs, code := d.denAs(aliceEnv, "", "events", "--sandbox", "s1"); code == 0 || !strings.Contains(errs, "not found") {
		t.Errorf("alice asking for root's sandbox's events: %d %s", code, errs)
	}
	if _, errs, code := d.den("events", "--sandbox", "nope"); code == 0 || !strings.Contains(errs, `"nope" not found`) {
		t.Errorf("events of an unknown sandbox: %d %s", code, errs)
	}
	req, _ := http.NewRequestWithContext(ctx, "GET", host+"/v1/events?follow=false", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Last-Event-ID", "not-an-id")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a malformed Last-Event-ID: status %d, want 400", resp.StatusCode)
	}
	// The header works as ?after= does.
	req, _ = http.NewRequestWithContext(context.WithoutCancel(ctx), "GET", host+"/v1/events?follow=false", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Last-Event-ID", "0")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	body := string(b)
	if err != nil || resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" || !strings.Contains(body, "\nid: ") {
		t.Errorf("stream from Last-Event-ID 0: %d %s\n%s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
}
