package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/den-dev/den/api"
)

// docMove is docs/fleet.md's host that ran on SQLite: a dend with a
// running sandbox, whose store the examples import into PostgreSQL
// (bin/dend --import-sqlite) and which they start again on it, on the
// same data directory. The move goes into a new database of its own,
// store: the examples' 'postgres://...' is the fleet's database, which
// the examples before it have filled, and an import refuses a database
// that holds records.
type docMove struct {
	dd      *docDends
	host    *dend
	args    []string     // the host's own: data and run directories, subnet, socket
	sandbox *api.Sandbox // running on the host before the move
	store   string
}

// startMove starts the host on SQLite, as the current dend, with a
// running sandbox.
func (dd *docDends) startMove(store string) *docMove {
	if err := dd.start(nil, nil); err != nil {
		dd.t.Fatal(err)
	}
	m := &docMove{dd: dd, host: dd.cur, args: slices.Clone(dd.cur.args), store: store}
	m.sandbox = m.host.create("legacy")
	dd.move = m
	return m
}

// env is the examples' environment with the move's database for theirs.
func (m *docMove) env(env []string) ([]string, error) {
	i := slices.IndexFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "DEN_STORE=") })
	if i < 0 {
		return nil, errors.New("the move into PostgreSQL names no DEN_STORE")
	}
	env = slices.Clone(env)
	env[i] = "DEN_STORE=" + m.store
	return env, nil
}

// importSQLite runs dend ARGS (--import-sqlite FILE) once on the host's
// data directory and socket, and returns what it printed.
func (m *docMove) importSQLite(args, env []string) (string, error) {
	if m == nil {
		return "", errors.New("bin/dend --import-sqlite: this docs file's rig has no host on SQLite to move")
	}
	env, err := m.env(env)
	if err != nil {
		return "", err
	}
	m.dd.mu.Lock()
	defer m.dd.mu.Unlock()
	cmd := exec.Command(filepath.Join(binDir, "dend"), append(slices.Clone(m.args), args...)...)
	cmd.Env = append(os.Environ(), env...)
	out, err := runFor(cmd, 2*time.Minute)
	if err != nil {
		return "", fmt.Errorf("dend %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out, nil
}

// restart starts the host again with ARGS on its data directory, now on
// PostgreSQL, and checks that it took over the sandbox that kept running:
// the same generation, still running.
func (m *docMove) restart(args, env []string) error {
	env, err := m.env(env)
	if err != nil {
		return err
	}
	dd := m.dd
	dd.mu.Lock()
	defer dd.mu.Unlock()
	dd.stopLocked()
	m.host.args, m.host.env = append(slices.Clone(m.args), args...), env
	if err := dd.runLocked(m.host, args); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	got, err := m.host.c.GetSandbox(ctx, m.sandbox.ID)
	if err != nil {
		return fmt.Errorf("the moved host's sandbox %s: %w", m.sandbox.Name, err)
	}
	if got.State != api.StateRunning || got.Generation != m.sandbox.Generation {
		return fmt.Errorf("the moved host's sandbox %s is %s, generation %d; want running, generation %d, as before the move",
			got.Name, got.State, got.Generation, m.sandbox.Generation)
	}
	return nil
}
