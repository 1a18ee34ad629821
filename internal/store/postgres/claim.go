package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/den-dev/den/internal/errdefs"
)

// lockNode is the first key of the two-key session advisory lock a dend
// holds on its node's name (the second is a hash of the name; see Claim).
const lockNode int32 = 0x64656f

// solePing is how often the connection holding the lock is checked.
const solePing = 5 * time.Second

// Claim claims node name for this dend, until release is called or the
// claim is lost; lost then receives why, once. Several dends share a
// database as the nodes of a fleet, each under its own name; a second
// dend under a name already claimed is refused with the first one's
// address. The claim is a session advisory lock on a connection of its
// own: PostgreSQL drops it with the connection, so a dend that dies
// frees its name, and a dend whose connection drops must stop (lost),
// for another may claim the name meanwhile.
func (s *Store) Claim(ctx context.Context, name string) (lost <-chan error, release func(), err error) {
	cfg := s.pool.Config().ConnConfig.Copy()
	cfg.RuntimeParams["application_name"] = "dend " + name
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("claiming the database for this dend: %w", err)
	}
	var got bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1, hashtext($2))`, lockNode, name).Scan(&got); err != nil {
		conn.Close(ctx)
		return nil, nil, fmt.Errorf("claiming the database for this dend: %w", err)
	}
	if !got {
		holder := claimHolder(ctx, conn, name)
		conn.Close(ctx)
		err := errdefs.Conflict("another dend (%s) is running as node %q on this database", holder, name)
		return nil, nil, errdefs.WithHint(err, "stop the other dend first, or give this one a name of its own with --node")
	}
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	lostc := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(solePing)
		defer t.Stop()
		for {
			select {
			case <-wctx.Done():
				return
			case <-t.C:
			}
			pctx, pcancel := context.WithTimeout(wctx, solePing)
			err := conn.Ping(pctx)
			pcancel()
			if err != nil && wctx.Err() == nil {
				lostc <- fmt.Errorf("lost the connection holding this dend's claim on node %q (%w); another dend may claim it now, so this one stops", name, err)
				return
			}
		}
	}()
	release = func() {
		cancel()
		<-done
		conn.Close(context.Background()) // closing the session drops its lock
	}
	return lostc, release, nil
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
