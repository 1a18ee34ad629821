package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/den-dev/den/internal/cluster"
	"github.com/den-dev/den/internal/errdefs"
)

var _ cluster.Registry = (*Store)(nil)

const nodeColumns = `name, epoch, peer_url, state, reason, info, joined_at, heartbeat_at, lease_expires`

func scanNode(row scanner) (cluster.Node, error) {
	var n cluster.Node
	var state string
	var info []byte
	if err := row.Scan(&n.Name, &n.Epoch, &n.PeerURL, &state, &n.Reason, &info, &n.JoinedAt, &n.HeartbeatAt, &n.LeaseExpires); err != nil {
		return n, err
	}
	n.State = cluster.State(state)
	if err := json.Unmarshal(info, &n.Info); err != nil {
		return n, fmt.Errorf("decoding the info of node %q: %w", n.Name, err)
	}
	n.JoinedAt, n.HeartbeatAt, n.LeaseExpires = n.JoinedAt.UTC(), n.HeartbeatAt.UTC(), n.LeaseExpires.UTC()
	return n, nil
}

func nodeNotFound(name string) error {
	return errdefs.WithHint(errdefs.NotFound("no node %q in this fleet", name), "`den node ls` lists the nodes")
}

// JoinNode records n as active, with a lease of ttl from the database's
// clock and an epoch one past the node's last.
func (s *Store) JoinNode(ctx context.Context, n cluster.Node, ttl time.Duration) (cluster.Node, error) {
	info, err := json.Marshal(n.Info)
	if err != nil {
		return n, fmt.Errorf("encoding the info of node %q: %w", n.Name, err)
	}
	var out cluster.Node
	err = s.tx(ctx, func(tx pgx.Tx) error {
		var err error
		out, err = scanNode(tx.QueryRow(ctx, `INSERT INTO nodes (`+nodeColumns+`)
			VALUES ($1, 1, $2, 'active', '', $3, now(), now(), now() + make_interval(secs => $4))
			ON CONFLICT (name) DO UPDATE SET epoch = nodes.epoch + 1, peer_url = EXCLUDED.peer_url,
				state = 'active', reason = '', info = EXCLUDED.info, joined_at = now(),
				heartbeat_at = now(), lease_expires = EXCLUDED.lease_expires
			RETURNING `+nodeColumns, n.Name, n.PeerURL, string(info), ttl.Seconds()))
		return err
	})
	if err != nil {
		return out, s.fail(err, "joining the fleet as node %q", n.Name)
	}
	return out, nil
}

// RenewNode extends the lease of node name's epoch by ttl. A node another
// epoch holds, or that was declared lost, is a conflict.
func (s *Store) RenewNode(ctx context.Context, name string, epoch int64, info cluster.Info, ttl time.Duration) (cluster.Node, error) {
	b, err := json.Marshal(info)
	if err != nil {
		return cluster.Node{}, fmt.Errorf("encoding the info of node %q: %w", name, err)
	}
	n, err := scanNode(s.pool.QueryRow(ctx, `UPDATE nodes SET info = $3, heartbeat_at = now(),
			lease_expires = now() + make_interval(secs => $4)
		WHERE name = $1 AND epoch = $2 AND state <> 'lost'
		RETURNING `+nodeColumns, name, epoch, string(b), ttl.Seconds()))
	if errors.Is(err, pgx.ErrNoRows) {
		cur, gerr := s.Node(ctx, name)
		switch {
		case gerr != nil:
			return n, errdefs.Conflict("node %q is no longer in the fleet: %v", name, gerr)
		case cur.Epoch != epoch:
			return cur, errdefs.Conflict("node %q was joined again by another dend (epoch %d, this one %d)", name, cur.Epoch, epoch)
		default:
			return cur, errdefs.Conflict("node %q was declared lost: %s", name, cur.Reason)
		}
	}
	if err != nil {
		return n, s.fail(err, "renewing the lease of node %q", name)
	}
	return n, nil
}

// Nodes lists every node by name.
func (s *Store) Nodes(ctx context.Context) ([]cluster.Node, error) {
	return queryAll(ctx, s, scanNode, "listing nodes", `SELECT `+nodeColumns+` FROM nodes ORDER BY name`)
}

// Node returns node name's record.
func (s *Store) Node(ctx context.Context, name string) (cluster.Node, error) {
	n, err := scanNode(s.pool.QueryRow(ctx, `SELECT `+nodeColumns+` FROM nodes WHERE name = $1`, name))
	if errors.Is(err, pgx.ErrNoRows) {
		return n, nodeNotFound(name)
	}
	if err != nil {
		return n, s.fail(err, "reading node %q", name)
	}
	return n, nil
}

// ExpireNodes declares lost every active or draining node whose lease
// ran out by the database's clock, cluster.FenceGrace ago: its sandboxes
// are surely stopped by then.
func (s *Store) ExpireNodes(ctx context.Context, reason string) ([]cluster.Node, error) {
	return queryAll(ctx, s, scanNode, "declaring nodes lost",
		`UPDATE nodes SET state = 'lost', reason = $1
		WHERE state <> 'lost' AND lease_expires + make_interval(secs => $2) < now()
		RETURNING `+nodeColumns, reason, cluster.FenceGrace.Seconds())
}

// SetNodeState moves a node whose lease is kept between active and
// draining.
func (s *Store) SetNodeState(ctx context.Context, name string, to cluster.State) (cluster.Node, error) {
	if to != cluster.StateActive && to != cluster.StateDraining {
		return cluster.Node{}, errdefs.Invalid("a node can be set active or draining, not %q", to)
	}
	n, err := scanNode(s.pool.QueryRow(ctx, `UPDATE nodes SET state = $2
		WHERE name = $1 AND state <> 'lost' RETURNING `+nodeColumns, name, string(to)))
	if errors.Is(err, pgx.ErrNoRows) {
		cur, gerr := s.Node(ctx, name)
		if gerr != nil {
			return cur, gerr
		}
		return cur, errdefs.WithHint(errdefs.Conflict("node %q is lost: %s", name, cur.Reason),
			"a lost node comes back active when its dend starts again")
	}
	if err != nil {
		return n, s.fail(err, "setting node %q %s", name, to)
	}
	return n, nil
}

// RemoveNode deletes a lost node's record, once no live sandbox names it.
func (s *Store) RemoveNode(ctx context.Context, name string) error {
	err := s.tx(ctx, func(tx pgx.Tx) error {
		n, err := scanNode(tx.QueryRow(ctx, `SELECT `+nodeColumns+` FROM nodes WHERE name = $1 FOR UPDATE`, name))
		if errors.Is(err, pgx.ErrNoRows) {
			return nodeNotFound(name)
		}
		if err != nil {
			return err
		}
		var alive bool
		if err := tx.QueryRow(ctx, `SELECT $1::timestamptz > now()`, n.LeaseExpires).Scan(&alive); err != nil {
			return err
		}
		if n.State != cluster.StateLost && alive {
			return errdefs.WithHint(errdefs.Conflict("node %q holds its lease: its dend is running", name),
				fmt.Sprintf("`den node drain %s`, then stop its dend, before removing it", name))
		}
		var held int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM sandboxes WHERE node = $1 AND state <> 'destroyed'`, name).Scan(&held); err != nil {
			return err
		}
		if held > 0 {
			return errdefs.WithHint(errdefs.Conflict("%d sandboxes are still on node %q", held, name),
				"move, recover or remove them first: `den ls --json` says which node each sandbox is on")
		}
		_, err = tx.Exec(ctx, `DELETE FROM nodes WHERE name = $1`, name)
		return err
	})
	if err != nil && errdefs.Class(err) == nil {
		return s.fail(err, "removing node %q", name)
	}
	return err
}

// ClusterKey returns the fleet's key, making it from fresh (32 random
// bytes) if no node made it before.
func (s *Store) ClusterKey(ctx context.Context, fresh []byte) ([]byte, error) {
	var key []byte
	err := s.tx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO cluster (id, key) VALUES (1, $1) ON CONFLICT (id) DO NOTHING`, fresh); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `SELECT key FROM cluster WHERE id = 1`).Scan(&key)
	})
	if err != nil {
		return nil, s.fail(err, "reading the fleet's key")
	}
	return key, nil
}
