package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
	"github.com/den-dev/den/internal/store/postgres/pgtest"
)

// ownPostgres starts a PostgreSQL server of the test's own, one it may
// halt and resume without disturbing other tests, with a fresh database;
// it returns the server and a --store-file naming that database.
func ownPostgres(t *testing.T) (*pgtest.Server, string) {
	t.Helper()
	srv, err := pgtest.Start(ctxT(t, time.Minute), pgtest.Options{})
	if err != nil {
		t.Fatalf("starting PostgreSQL for the test: %v", err)
	}
	t.Cleanup(func() { srv.Stop() })
	db, err := srv.CreateDatabase(ctxT(t, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "store")
	if err := os.WriteFile(file, []byte(srv.DSN(db)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return srv, file
}

// dbUnreachable is what every verb answers while den's database cannot
// be reached, and the hint with it.
const (
	dbUnreachable     = "den's database cannot be reached"
	dbUnreachableHint = "try again shortly"
)

// While PostgreSQL is down, create and checkpoint, through the API and
// the CLI, answer as exec does: den's database cannot be reached, try
// again; and they change nothing. Once it is back, dend carries on.
func TestPostgresDownAnswersUnavailable(t *testing.T) {
	srv, file := ownPostgres(t)
	// A lease long enough for the whole outage: the dend rides it out.
	d := startDend(t, "--store-file", file, "--node", "solo", "--node-lease", "90s")
	ctx := ctxT(t, 5*time.Minute)
	d.create("kept")
	d.mustSh("kept", "echo one > /root/f")
	if _, err := d.c.Checkpoint(ctx, "kept", client.CheckpointOptions{Name: "c1"}); err != nil {
		t.Fatal(err)
	}
	before := leftovers(t, d)

	srv.Halt()
	outage := time.Now()
	_, err := d.c.Exec(ctx, "kept", api.ExecRequest{Argv: []string{"true"}}, client.ExecIO{})
	wantRefused(t, "exec with the database down", err, client.ErrUnavailable, dbUnreachable, dbUnreachableHint)
	_, err = d.c.CreateSandbox(ctx, api.CreateSandboxRequest{Name: "new", Image: "busybox", Memory: "256M"})
	wantRefused(t, "create with the database down", err, client.ErrUnavailable, dbUnreachable, dbUnreachableHint)
	_, err = d.c.Checkpoint(ctx, "kept", client.CheckpointOptions{Name: "c2"})
	wantRefused(t, "checkpoint with the database down", err, client.ErrUnavailable, dbUnreachable, dbUnreachableHint)
	_, err = d.c.Checkpoint(ctx, "kept", client.CheckpointOptions{})
	wantRefused(t, "an unnamed checkpoint with the database down", err, client.ErrUnavailable, dbUnreachable, dbUnreachableHint)
	// Said once: no layer repeats what the store said it was doing.
	if msg := err.Error(); strings.Count(msg, "recording request") > 1 {
		t.Errorf("the refusal repeats itself: %q", msg)
	}
	for _, args := range [][]string{
		{"create", "new2", "--image", "busybox"},
		{"checkpoint", "kept", "--name", "c3"},
	} {
		_, errs, code := d.den(args...)
		if code == 0 || !strings.Contains(errs, dbUnreachable) || !strings.Contains(errs, dbUnreachableHint) || strings.Contains(errs, "internal error") ||
			strings.Count(errs, "recording request") > 1 {
			t.Errorf("den %s with the database down: exit %d, %q; want %q with a hint", strings.Join(args, " "), code, errs, dbUnreachable)
		}
	}
	if err := srv.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("the database was down for %s", time.Since(outage).Round(time.Millisecond))

	// Back: nothing was changed by the refused calls, and dend goes on.
	var after string
	waitFor(t, time.Minute, "dend to answer from the database again", func() bool {
		_, err := d.c.ListSandboxes(ctx)
		return err == nil
	})
	if after = leftovers(t, d); after != before {
		t.Errorf("the refused calls left something:\nbefore %s\nafter  %s", before, after)
	}
	cks, err := d.c.Checkpoints(ctx, "kept")
	if err != nil || len(cks) != 1 || cks[0].Name != "c1" {
		t.Errorf("kept's checkpoints after the outage: %+v, %v", cks, err)
	}
	if got := d.mustSh("kept", "cat /root/f"); got != "one\n" {
		t.Fatalf("kept after the outage: /root/f = %q", got)
	}
	if s := d.inspect("kept"); s.State != api.StateRunning {
		t.Fatalf("kept after the outage: %s (%s)", s.State, s.Reason)
	}
	d.create("new")
	if _, err := d.c.Checkpoint(ctx, "kept", client.CheckpointOptions{Name: "c2"}); err != nil {
		t.Fatalf("checkpoint after the outage: %v", err)
	}
	if !d.running() {
		t.Fatalf("dend stopped:\n%s", tail(d.logs(), 3000))
	}
}

// running reports whether dend still answers: a dend that stopped has
// closed its socket.
func (d *dend) running() bool {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := d.c.Health(ctx)
	return err == nil
}

// startLeaseNode starts a dend as node name of the fleet on the database
// in storeFile, with the lease given.
func startLeaseNode(t *testing.T, name, storeFile, lease string) *dend {
	t.Helper()
	return startDend(t, "--store-file", storeFile, "--node", name, "--listen", freeAddr(t), "--node-lease", lease)
}

// exitLine is the line dend printed when it stopped on its own, or "".
func (d *dend) exitLine() string {
	for _, l := range strings.Split(d.logs(), "\n") {
		if strings.HasPrefix(l, "dend: ") {
			return l
		}
	}
	return ""
}

// callTally counts how a loop's calls ended while the database restarted.
type callTally struct {
	mu      sync.Mutex
	ok      int
	refused int       // den's database cannot be reached
	lastNo  time.Time // when the last was refused
	bad     []string  // anything else: an internal error, a call past its deadline
	made    []string  // sandboxes created
}

// note files the outcome of one call, what.
func (c *callTally) note(what string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ce *client.Error
	switch {
	case err == nil:
		c.ok++
	case errors.As(err, &ce) && errors.Is(err, client.ErrUnavailable) && strings.Contains(ce.Message(), dbUnreachable) && ce.Hint() != "":
		c.refused++
		c.lastNo = time.Now()
	default:
		c.bad = append(c.bad, fmt.Sprintf("%s: %v", what, err))
	}
}

func (c *callTally) counts() (ok, refused int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ok, c.refused
}

// A PostgreSQL restart well within the lease, in the middle of creates
// and execs on two nodes: both dends ride it out, taking their claims
// back; each call either succeeded or was told den's database cannot be
// reached (none an internal error, none past its deadline); every
// sandbox made works after.
func TestPostgresRestartRiddenOut(t *testing.T) {
	srv, file := ownPostgres(t)
	nodes := map[string]*dend{
		"node-a": startLeaseNode(t, "node-a", file, "10s"),
		"node-b": startLeaseNode(t, "node-b", file, "10s"),
	}
	for name, d := range nodes {
		d.create("base-"+name, func(r *api.CreateSandboxRequest) { r.Node = name })
	}
	// One loop a node: create a sandbox on it, exec in it and in the
	// node's first, again and again, each call with a deadline.
	const deadline = 2 * time.Minute
	stop := make(chan struct{})
	var wg sync.WaitGroup
	tallies := map[string]*callTally{}
	for name, d := range nodes {
		tl := &callTally{}
		tallies[name] = tl
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 1; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				sb := fmt.Sprintf("%s-%d", name, i)
				ctx, cancel := context.WithTimeout(context.Background(), deadline)
				_, err := d.c.CreateSandbox(ctx, api.CreateSandboxRequest{Name: sb, Image: "busybox", Memory: "128M", Node: name})
				cancel()
				tl.note("create "+sb, err)
				if err != nil {
					time.Sleep(20 * time.Millisecond) // the database is down: no need to spin
				}
				if err == nil {
					tl.mu.Lock()
					tl.made = append(tl.made, sb)
					tl.mu.Unlock()
				}
				for _, in := range []string{sb, "base-" + name} {
					if err != nil && in == sb {
						continue
					}
					ctx, cancel := context.WithTimeout(context.Background(), deadline)
					var out bytes.Buffer
					_, xerr := d.c.Exec(ctx, in, api.ExecRequest{Argv: []string{"echo", "hi"}}, client.ExecIO{Stdout: &out})
					cancel()
					if xerr == nil && out.String() != "hi\n" {
						xerr = fmt.Errorf("printed %q", out.String())
					}
					tl.note("exec in "+in, xerr)
				}
			}
		}()
	}
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	}()
	okBefore := map[string]int{}
	for name, tl := range tallies {
		waitFor(t, 5*time.Minute, name+"'s loop to get going", func() bool { ok, _ := tl.counts(); return ok >= 4 })
		okBefore[name], _ = tl.counts()
	}

	start := time.Now()
	srv.Halt()
	time.Sleep(300 * time.Millisecond)
	if err := srv.Resume(ctxT(t, time.Minute)); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	t.Logf("PostgreSQL restarted in %s", back.Sub(start).Round(time.Millisecond))

	// Both dends take their claims back, and their loops go on.
	for name, d := range nodes {
		waitFor(t, time.Minute, name+" to take its claim back", func() bool {
			return strings.Contains(d.logs(), "took back this dend's claim") || d.exitLine() != ""
		})
		if l := d.exitLine(); l != "" {
			t.Fatalf("%s stopped: %s", name, l)
		}
	}
	for name, tl := range tallies {
		waitFor(t, 5*time.Minute, name+"'s loop to go on after the restart", func() bool {
			ok, _ := tl.counts()
			return ok >= okBefore[name]+6
		})
	}
	close(stop)
	wg.Wait()

	for name, d := range nodes {
		tl := tallies[name]
		t.Logf("%s: %d calls succeeded, %d were told the database cannot be reached, the last %s after it was back",
			name, tl.ok, tl.refused, tl.lastNo.Sub(back).Round(time.Millisecond))
		for _, b := range tl.bad {
			t.Errorf("%s: %s", name, b)
		}
		if l := d.exitLine(); l != "" || !d.running() {
			t.Fatalf("%s stopped: %s", name, l)
		}
		// Every sandbox made works, and no other is left: a create
		// refused left nothing.
		want := map[string]bool{"base-" + name: true}
		for _, sb := range tl.made {
			want[sb] = true
		}
		list, err := d.c.ListSandboxes(ctxT(t, time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		for _, sb := range list {
			if sb.Node != name {
				continue
			}
			if !want[sb.Name] {
				t.Errorf("%s: sandbox %s is left of a create that was refused: %s (%s)", name, sb.Name, sb.State, sb.Reason)
				continue
			}
			delete(want, sb.Name)
			if sb.State != api.StateRunning {
				t.Errorf("%s: sandbox %s is %s (%s)", name, sb.Name, sb.State, sb.Reason)
				continue
			}
			if got := d.mustSh(sb.Name, "echo after"); got != "after\n" {
				t.Errorf("%s: exec in %s after the restart: %q", name, sb.Name, got)
			}
		}
		for sb := range want {
			t.Errorf("%s: sandbox %s, made, is missing", name, sb)
		}
	}
}

// A PostgreSQL outage longer than the lease stops the dend, saying its
// lease ran out; its sandbox runs on, and the dend started again once the
// database is back takes it back.
func TestPostgresOutagePastLeaseStops(t *testing.T) {
	srv, file := ownPostgres(t)
	d := startLeaseNode(t, "solo", file, "3s")
	d.create("kept")
	d.mustSh("kept", "echo one > /root/f")
	srv.Halt()
	waitFor(t, time.Minute, "dend to stop once its lease ran out", func() bool { return d.exitLine() != "" })
	if l := d.exitLine(); !strings.Contains(l, "lease") {
		t.Fatalf("dend stopped saying %q, want its lease", l)
	}
	t.Logf("%s", d.exitLine())
	if len(d.instances()) == 0 {
		t.Fatal("the sandbox's instance went with dend")
	}
	if err := srv.Resume(ctxT(t, time.Minute)); err != nil {
		t.Fatal(err)
	}
	d.stop()
	d.start()
	if got := d.mustSh("kept", "cat /root/f"); got != "one\n" {
		t.Fatalf("after dend started again: /root/f = %q", got)
	}
}
