package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/den-dev/den/internal/errdefs"
)

// lockSole is the session advisory lock of the one dend a database
// serves (see Sole).
const lockSole int64 = 0x64656e_0002

// solePing is how often the connection holding the lock is checked.
const solePing = 5 * time.Second

// Sole claims the database for one dend, named name, until release is
// called or the claim is lost; lost then receives why, once.
//
// The store itself is safe with several dends writing at once, but the
// sandbox service is not yet: a dend takes every sandbox in the store
// for its own when it starts (reattaching, settling, applying the idle
// policy), with no notion of another node's. Until nodes and leases
// exist, a database serves one dend, and a second is refused with the
// first one's name. The claim is a session advisory lock on a connection
// of its own: PostgreSQL drops it with the connection, so a dend that
// dies frees it, and a dend whose connection drops must stop (lost).
func (s *Store) Sole(ctx context.Context, name string) (lost <-chan error, release func(), err error) {
	cfg := s.pool.Config().ConnConfig.Copy()
	cfg.RuntimeParams["application_name"] = "dend " + name
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("claiming the database for this dend: %w", err)
	}
	var got bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, lockSole).Scan(&got); err != nil {
		conn.Close(ctx)
		return nil, nil, fmt.Errorf("claiming the database for this dend: %w", err)
	}
	if !got {
		holder := soleHolder(ctx, conn)
		conn.Close(ctx)
		err := errdefs.Conflict("another dend (%s) is running on this database: until den runs as a fleet, one PostgreSQL database serves one dend", holder)
		return nil, nil, errdefs.WithHint(err, "stop the other dend first, or give this one a database of its own")
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
				lostc <- fmt.Errorf("lost the connection holding this dend's claim on the database (%w); another dend may claim it now, so this one stops", err)
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

// soleHolder names the dend holding the claim, as well as PostgreSQL
// knows it.
func soleHolder(ctx context.Context, conn *pgx.Conn) string {
	var app, addr string
	err := conn.QueryRow(ctx, `SELECT a.application_name, coalesce(host(a.client_addr), 'local')
		FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
		WHERE l.locktype = 'advisory' AND l.granted
			AND l.classid = ($1::bigint >> 32)::oid AND l.objid = ($1::bigint & 4294967295)::oid AND l.objsubid = 1
		LIMIT 1`, lockSole).Scan(&app, &addr)
	if err != nil {
		return "which one, PostgreSQL would not say"
	}
	return fmt.Sprintf("%s, connected from %s", app, addr)
}
