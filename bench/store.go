package main

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
	"github.com/den-dev/den/internal/sandbox"
	"github.com/den-dev/den/internal/store/postgres"
	"github.com/den-dev/den/internal/store/postgres/pgtest"
	"github.com/den-dev/den/internal/store/sqlite"
)

// storeClients is how many clients create and exec at once in the store
// step, and storeCreates how many sandboxes each creates.
const (
	storeClients = 4
	storeCreates = 6
	// storeWrites is how many record writes each client makes when the
	// stores are measured alone.
	storeWrites = 250
)

// storeThroughput measures what the store costs dend, SQLite against
// PostgreSQL on one node, in one run: creates and execs per second
// through the bench's dend (SQLite) and through a second dend on a
// PostgreSQL server started here (fsync and synchronous commit on, as in
// production, on this machine's disk, over loopback); then the two
// stores alone, writing the records a create and an exec write, with no
// dend around them.
func (b *bench) storeThroughput() error {
	srv, err := pgtest.Start(b.ctx, pgtest.Options{Durable: true})
	if err != nil {
		return err
	}
	defer srv.Stop()
	db, err := srv.CreateDatabase(b.ctx)
	if err != nil {
		return err
	}
	pgd, err := startDendWith(b.bin, filepath.Join(b.work, "pg"), b.storeSubnet, []string{"DEN_STORE=" + srv.DSN(db)})
	if err != nil {
		return fmt.Errorf("starting a dend on PostgreSQL: %w", err)
	}
	defer pgd.close()
	if _, err := pgd.c.BuildImage(b.ctx, api.BuildImageRequest{Name: "busybox"}, nil); err != nil {
		return fmt.Errorf("building busybox on PostgreSQL's dend: %w", err)
	}

	var rows []row
	var lines []string
	var onPG throughput
	for _, d := range []struct {
		name string
		d    *benchDend
	}{{"SQLite", b.d}, {"PostgreSQL", pgd}} {
		t, err := b.dendThroughput(d.d, "st")
		if err != nil {
			return fmt.Errorf("through dend on %s: %w", d.name, err)
		}
		onPG = t
		rows = append(rows,
			row{op: "create → running, dend on " + d.name, den: t.creates, note: fmt.Sprintf("%.1f creates/s", t.createRate)},
			row{op: "exec `true`, dend on " + d.name, den: t.execs, note: fmt.Sprintf("%.1f execs/s", t.execRate)})
	}
	db2, err := srv.CreateDatabase(b.ctx)
	if err != nil {
		return err
	}
	pg, err := postgres.Open(b.ctx, srv.DSN(db2), nil)
	if err != nil {
		return err
	}
	defer pg.Close()
	sq, err := sqlite.Open(b.ctx, filepath.Join(b.work, "store-alone.db"), nil)
	if err != nil {
		return err
	}
	defer sq.Close()
	for _, s := range []struct {
		name string
		st   sandbox.Store
	}{{"SQLite", sq}, {"PostgreSQL", pg}} {
		creates, exec, err := storeAlone(b.ctx, s.st)
		if err != nil {
			return fmt.Errorf("%s alone: %w", s.name, err)
		}
		lines = append(lines, fmt.Sprintf("%s alone, %d writers: %.0f sandbox creates/s (record, event, 2 updates), %.0f execs/s (a run's record and its end)",
			s.name, storeClients, creates, exec))
	}
	b.add(section{title: fmt.Sprintf("store throughput, one node (%d clients; creates: %d sandboxes each; execs: one sandbox each for %s)",
		storeClients, storeCreates, b.loadFor), rows: rows, lines: lines})
	fleet, err := b.fleetThroughput(pgd, srv.DSN(db), b.storeSubnet, onPG)
	if err != nil {
		return err
	}
	b.add(fleet)
	return nil
}

// throughput is what dendThroughput measured.
type throughput struct {
	creates, execs       samples
	createRate, execRate float64 // per second, all clients together
}

// dendThroughput has storeClients clients create storeCreates sandboxes
// each, then exec `true` in one each for b.loadFor, and removes them.
func (b *bench) dendThroughput(d *benchDend, prefix string) (throughput, error) {
	var t throughput
	var mu sync.Mutex
	var names []string
	defer func() {
		for _, n := range names {
			d.c.RemoveSandbox(b.ctx, n, true)
		}
	}()
	off := "0"
	errs := make(chan error, storeClients)
	start := time.Now()
	for c := range storeClients {
		go func() {
			for i := range storeCreates {
				name := fmt.Sprintf("%s%d-%d", prefix, c, i)
				took, err := timed(func() error {
					_, err := d.c.CreateSandbox(b.ctx, api.CreateSandboxRequest{Name: name, Image: "busybox", Memory: "128M", Disk: "64M",
						Policy: &api.Policy{PauseAfter: &off, HibernateAfter: &off, TTL: &off}})
					return err
				})
				mu.Lock()
				names = append(names, name)
				t.creates = append(t.creates, took)
				mu.Unlock()
				if err != nil {
					errs <- d.failed(fmt.Errorf("creating %s: %w", name, err))
					return
				}
			}
			errs <- nil
		}()
	}
	for range storeClients {
		if err := <-errs; err != nil {
			return t, err
		}
	}
	t.createRate = float64(len(t.creates)) / time.Since(start).Seconds()

	ctx, cancel := context.WithTimeout(b.ctx, b.loadFor)
	defer cancel()
	for c := range storeClients {
		go func() {
			name := fmt.Sprintf("%s%d-0", prefix, c)
			for ctx.Err() == nil {
				took, err := timed(func() error {
					_, err := d.c.Exec(b.ctx, name, api.ExecRequest{Argv: []string{"true"}}, client.ExecIO{})
					return err
				})
				if err != nil {
					errs <- fmt.Errorf("exec in %s: %w", name, err)
					return
				}
				mu.Lock()
				t.execs = append(t.execs, took)
				mu.Unlock()
			}
			errs <- nil
		}()
	}
	for range storeClients {
		if err := <-errs; err != nil {
			return t, err
		}
	}
	t.execRate = float64(len(t.execs)) / b.loadFor.Seconds()
	return t, nil
}

// storeAlone has storeClients writers write the records of sandbox
// creates (the record, its first event, two updates), then of execs (a
// run's record and its end), and returns how many of each a second.
func storeAlone(ctx context.Context, st sandbox.Store) (creates, execs float64, err error) {
	var mu sync.Mutex
	var firstErr error
	fail := func(e error) {
		mu.Lock()
		defer mu.Unlock()
		if firstErr == nil {
			firstErr = e
		}
	}
	each := func(f func(c, i int) error) float64 {
		var wg sync.WaitGroup
		start := time.Now()
		for c := range storeClients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range storeWrites {
					if err := f(c, i); err != nil {
						fail(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		return float64(storeClients*storeWrites) / time.Since(start).Seconds()
	}
	creates = each(func(c, i int) error {
		id := fmt.Sprintf("a%d-%d", c, i)
		sb := &sandbox.Sandbox{ID: id, Name: id, State: sandbox.StateCreating, Slot: c*storeWrites + i, Node: "bench",
			Spec: sandbox.Spec{Image: "busybox", CPUs: 1, MemoryBytes: 128 << 20}}
		if err := st.CreateSandbox(ctx, sb, sandbox.Event{Type: sandbox.EventCreated}); err != nil {
			return err
		}
		sb.State, sb.Generation = sandbox.StateRunning, 1
		if err := st.UpdateSandbox(ctx, sb, sandbox.Event{Type: sandbox.EventStarted, Generation: 1}); err != nil {
			return err
		}
		sb.Token = "t" + strconv.Itoa(i)
		return st.UpdateSandbox(ctx, sb, sandbox.Event{Type: "touched"})
	})
	execs = each(func(c, i int) error {
		r := &sandbox.Run{ID: fmt.Sprintf("r%d-%d", c, i), SandboxID: fmt.Sprintf("a%d-0", c), Generation: 1,
			Argv: []string{"true"}, Status: sandbox.RunRunning}
		if err := st.CreateRun(ctx, r); err != nil {
			return err
		}
		code, end := 0, time.Now()
		r.Status, r.ExitCode, r.EndedAt = sandbox.RunExited, &code, &end
		return st.UpdateRun(ctx, r)
	})
	return creates, execs, firstErr
}

// fleetNodes is how many dends share one database in the fleet part of
// the store step.
const fleetNodes = 3

// fleetThroughput has fleetNodes dends on one PostgreSQL database (first,
// already running, and fleetNodes-1 more on the next /24s after subnet)
// each take the load dendThroughput makes at once, and reports each
// node's rates and the fleet's sum, beside one node on the same server.
func (b *bench) fleetThroughput(first *benchDend, dsn string, subnet string, one throughput) (section, error) {
	nodes := []*benchDend{first}
	defer func() {
		for _, d := range nodes[1:] {
			d.close()
		}
	}()
	for i := 1; i < fleetNodes; i++ {
		sub := nextSubnet(subnet, i)
		d, err := startDendWith(b.bin, filepath.Join(b.work, fmt.Sprintf("fleet%d", i)), sub, []string{"DEN_STORE=" + dsn},
			"--node", fmt.Sprintf("bench-node-%d", i))
		if err != nil {
			return section{}, fmt.Errorf("starting node %d of the fleet: %w", i, err)
		}
		nodes = append(nodes, d)
		if _, err := d.c.BuildImage(b.ctx, api.BuildImageRequest{Name: "busybox"}, nil); err != nil {
			return section{}, fmt.Errorf("building busybox on node %d: %w", i, err)
		}
	}
	results := make([]throughput, len(nodes))
	errs := make(chan error, len(nodes))
	for i, d := range nodes {
		go func() {
			var err error
			results[i], err = b.dendThroughput(d, fmt.Sprintf("fl%d-", i))
			errs <- err
		}()
	}
	for range nodes {
		if err := <-errs; err != nil {
			for _, d := range nodes {
				err = d.failed(err)
			}
			return section{}, fmt.Errorf("through the fleet: %w", err)
		}
	}
	var rows []row
	var creates, execs float64
	for i, t := range results {
		creates += t.createRate
		execs += t.execRate
		rows = append(rows,
			row{op: fmt.Sprintf("create → running, node %d of %d", i+1, len(nodes)), den: t.creates, note: fmt.Sprintf("%.1f creates/s", t.createRate)},
			row{op: fmt.Sprintf("exec `true`, node %d of %d", i+1, len(nodes)), den: t.execs, note: fmt.Sprintf("%.1f execs/s", t.execRate)})
	}
	return section{
		title: fmt.Sprintf("store throughput, %d nodes on one PostgreSQL (each: %d clients, the load of one node above, all at once; one machine's CPUs shared)", len(nodes), storeClients),
		rows:  rows,
		lines: []string{fmt.Sprintf("fleet: %.1f creates/s, %.1f execs/s together; one node on PostgreSQL alone: %.1f creates/s, %.1f execs/s (%.2f× and %.2f×)",
			creates, execs, one.createRate, one.execRate, creates/one.createRate, execs/one.execRate)},
	}, nil
}

// nextSubnet is the range i /24s after subnet, for another dend of a
// fleet on this machine.
func nextSubnet(subnet string, i int) string {
	base, err := netip.ParsePrefix(subnet)
	if err != nil {
		return subnet // startDend refuses it, saying why
	}
	a := base.Addr().As4()
	a[2] += byte(i)
	return netip.PrefixFrom(netip.AddrFrom4(a), base.Bits()).String()
}
