package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/den-dev/den/internal/errdefs"
)

// lockNode is the first key of the two-key session advisory lock a dend
// holds on its node's name (the second is a hash of the name; see Claim).
const lockNode int32 = 0x64656f

// Bounds on how often the connection holding the claim is checked: a
// third of the lease, as heartbeats come, within these.
const (
	maxClaimPing = 5 * time.Second
	minClaimPing = 250 * time.Millisecond
)

// claimRetry is how long a failed attempt to take the claim back waits
// before the next, at most.
const claimRetry = 200 * time.Millisecond

// Claim is this dend's claim on its node's name: a session advisory lock
// on a connection of its own. PostgreSQL drops the lock with the
// connection, so a dend that dies frees its name at once.
//
// A connection that drops (a database restart, a terminated backend) is
// a blip, not the end: the claim is taken back on a new connection, if
// that happens within the lease of when it was last known held, nobody
// else took the lock meanwhile, and (once the node joined the fleet, see
// Joined) the node's record is still this dend's, not declared lost and
// within its lease by the database's clock. Otherwise Lost receives why,
// once, and the dend must stop: another may be, or may soon be, acting
// as this node.
type Claim struct {
	s     *Store
	name  string
	lease time.Duration
	log   *slog.Logger
	lost  chan error

	mu    sync.Mutex
	conn  *pgx.Conn // the connection holding the lock; nil while it is taken back
	epoch int64     // the node's epoch in the fleet, once joined; 0 before

	cancel context.CancelFunc
	done   chan struct{}
}

// Claim claims node name for this dend, until Release or the claim is
// lost (see Claim's type). lease bounds how long the claim may be cut
// off before it is given up: the node's lease in a fleet. Several dends
// share a database as the nodes of a fleet, each under its own name; a
// second dend under a name already claimed is refused with the first
// one's address.
func (s *Store) Claim(ctx context.Context, name string, lease time.Duration) (*Claim, error) {
	if lease <= 0 {
		return nil, errors.New("claiming the database for this dend: no lease given")
	}
	c := &Claim{s: s, name: name, lease: lease, log: s.log.With("node", name), lost: make(chan error, 1), done: make(chan struct{})}
	conn, err := c.take(ctx)
	if err != nil {
		if errdefs.Class(err) == nil {
			err = fmt.Errorf("claiming the database for this dend: %w", err)
		}
		return nil, err
	}
	c.conn = conn
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	c.cancel = cancel
	go c.watch(wctx)
	return c, nil
}

// Lost receives why the claim was lost, once.
func (c *Claim) Lost() <-chan error { return c.lost }

// Joined tells the claim the node's epoch in the fleet: from now on it is
// taken back after a cut only while the node's record is that epoch's,
// not lost and within its lease.
func (c *Claim) Joined(epoch int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.epoch = epoch
}

// Release lets the claim go: closing its session drops the lock.
func (c *Claim) Release() {
	c.cancel()
	<-c.done
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn != nil {
		c.conn.Close(context.Background())
		c.conn = nil
	}
}

// take connects and takes the lock. Another dend holding it is a
// conflict naming that dend.
func (c *Claim) take(ctx context.Context) (*pgx.Conn, error) {
	cfg := c.s.pool.Config().ConnConfig.Copy()
	cfg.RuntimeParams["application_name"] = "dend " + c.name
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	var got bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1, hashtext($2))`, lockNode, c.name).Scan(&got); err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	if !got {
		holder := claimHolder(ctx, conn, c.name)
		conn.Close(context.WithoutCancel(ctx))
		err := errdefs.Conflict("another dend (%s) is running as node %q on this database", holder, c.name)
		return nil, errdefs.WithHint(err, "stop the other dend first, or give this one a name of its own with --node")
	}
	return conn, nil
}

// pingEvery is how often the connection holding the claim is checked.
func (c *Claim) pingEvery() time.Duration {
	return min(max(c.lease/3, minClaimPing), maxClaimPing)
}

// watch checks the connection holding the claim and takes the claim back
// when the connection dropped, until ctx ends or the claim is lost.
func (c *Claim) watch(ctx context.Context) {
	defer close(c.done)
	every := c.pingEvery()
	t := time.NewTicker(every)
	defer t.Stop()
	// When the claim was last known held: from before the check that
	// showed it, which can only end its term early.
	held := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		asked := time.Now()
		c.mu.Lock()
		conn := c.conn
		c.mu.Unlock()
		pctx, cancel := context.WithTimeout(ctx, every)
		err := conn.Ping(pctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			held = asked
			continue
		}
		c.log.Warn("lost the connection holding this dend's claim on its node; taking the claim back", "err", err)
		c.mu.Lock()
		c.conn = nil
		c.mu.Unlock()
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		conn.Close(cctx)
		cancel()
		back, err := c.retake(ctx, held, err)
		if ctx.Err() != nil {
			if back != nil {
				back.Close(context.Background())
			}
			return
		}
		if err != nil {
			c.log.Error("this dend lost its claim on its node; it stops", "err", err)
			c.lost <- err
			return
		}
		c.mu.Lock()
		c.conn = back
		c.mu.Unlock()
		held = time.Now()
		c.log.Info("took back this dend's claim on its node", "cut_for", time.Since(asked).Round(time.Millisecond))
		t.Reset(every)
	}
}

// retake takes the claim back on a new connection, trying until the
// lease of held runs out; cut is why the old connection went.
func (c *Claim) retake(ctx context.Context, held time.Time, cut error) (*pgx.Conn, error) {
	last := cut
	for {
		left := c.lease - time.Since(held)
		if left <= 0 {
			return nil, fmt.Errorf("could not take back this dend's claim on node %q within its lease (%s) after the connection holding it was lost (last: %w); another dend may take the name now, so this one stops",
				c.name, c.lease, last)
		}
		tctx, cancel := context.WithTimeout(ctx, left)
		conn, err := c.take(tctx)
		if err == nil {
			err = c.still(tctx, conn)
			if err != nil {
				conn.Close(context.WithoutCancel(ctx)) // and the lock with it
			}
		}
		cancel()
		switch {
		case ctx.Err() != nil:
			return conn, ctx.Err()
		case err == nil:
			return conn, nil
		case errdefs.Class(err) != nil:
			// Another dend holds the name, or the node's record is no
			// longer this dend's: stop at once.
			return nil, fmt.Errorf("lost this dend's claim on node %q while cut off from the database: %w; this one stops", c.name, err)
		}
		last = err
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(min(claimRetry, max(c.lease-time.Since(held), 0))):
		}
	}
}

// still checks, on the connection that took the claim back, that the
// node's record is still this dend's: the epoch it joined with, not lost,
// and its lease not run out by the database's clock. Before the node
// joined there is nothing to check.
func (c *Claim) still(ctx context.Context, conn *pgx.Conn) error {
	c.mu.Lock()
	epoch := c.epoch
	c.mu.Unlock()
	if epoch == 0 {
		return nil
	}
	var cur int64
	var state, reason string
	var alive bool
	err := conn.QueryRow(ctx, `SELECT epoch, state, reason, lease_expires > now() FROM nodes WHERE name = $1`, c.name).
		Scan(&cur, &state, &reason, &alive)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return errdefs.Conflict("node %q was removed from the fleet", c.name)
	case err != nil:
		return err
	case cur != epoch:
		return errdefs.Conflict("node %q was joined again by another dend (epoch %d, this one %d)", c.name, cur, epoch)
	case state == "lost":
		return errdefs.Conflict("node %q was declared lost: %s", c.name, reason)
	case !alive:
		return errdefs.Conflict("node %q's lease ran out, so another node may declare it lost", c.name)
	}
	return nil
}

// claimHolder names the dend holding the claim on node name, as well as
// PostgreSQL knows it.
func claimHolder(ctx context.Context, conn *pgx.Conn, name string) string {
	var app, addr string
	err := conn.QueryRow(ctx, `SELECT a.application_name, coalesce(host(a.client_addr), 'local')
		FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
		WHERE l.locktype = 'advisory' AND l.granted
			AND l.classid = $1::int4::oid AND l.objid = hashtext($2)::oid AND l.objsubid = 2
		LIMIT 1`, lockNode, name).Scan(&app, &addr)
	if err != nil {
		return "which one, PostgreSQL would not say"
	}
	return fmt.Sprintf("%s, connected from %s", app, addr)
}
