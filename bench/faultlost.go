package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

// nodeLost kills a fleet node's dend (and, half the time, its engines),
// waits until another node declares it lost, brings its uploaded
// sandboxes back through another node, checks that the lost node's old
// copies do not run on, and starts the lost node's dend again.
func (f *faultRun) nodeLost(ctx context.Context) {
	x := f.fleet[f.rng.Intn(len(f.fleet))]
	var others []*fnode
	for _, n := range f.fleet {
		if n != x && n.isUp() {
			others = append(others, n)
		}
	}
	if !x.isUp() || len(others) == 0 {
		return
	}
	withEngines := f.rng.Intn(2) == 0
	via := others[f.rng.Intn(len(others))]
	f.count("node-lost")
	fmt.Fprintf(os.Stderr, "faults: node %s lost (engines killed too: %v); recovering through %s\n", x.name, withEngines, via.name)
	f.killNode(x, withEngines)
	deadline := time.Now().Add(4*f.o.lease + 60*time.Second)
	for {
		var nl *api.NodeList
		err := f.call("nodes", x.name, via, func(ctx context.Context) (err error) {
			nl, err = via.c.Nodes(ctx)
			return err
		})
		if err == nil && nodeState(nl, x.name) == api.NodeLost {
			break
		}
		if time.Now().After(deadline) {
			f.defect("wrong", "node %s, whose dend was killed, was not declared lost by %s within %s of its lease",
				x.name, via.name, 4*f.o.lease+60*time.Second)
			f.restart(x)
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	recovered := f.recoverLost(via, x.name)
	if !withEngines {
		f.checkFenced(x, recovered)
	}
	time.Sleep(f.drawDelay(0, 3*time.Second))
	f.restart(x)
}

func nodeState(nl *api.NodeList, name string) string {
	if nl == nil {
		return ""
	}
	for _, n := range nl.Nodes {
		if n.Name == name {
			return n.State
		}
	}
	return ""
}

// recoverLost brings back, through via, every sandbox recorded in error on
// lost node x with an upload, from its last upload, and returns their ids.
// One with nothing uploaded waits for x.
func (f *faultRun) recoverLost(via *fnode, x string) []string {
	// The records turn to error shortly after the node is declared lost.
	var list []api.Sandbox
	for try := 0; try < 20; try++ {
		err := f.call("list", "", via, func(ctx context.Context) (err error) {
			list, err = via.c.ListSandboxes(ctx)
			return err
		})
		pending := false
		for _, sb := range list {
			if sb.Node == x && sb.State != api.StateError && sb.State != api.StateHibernated && sb.State != api.StateStopped {
				pending = true
			}
		}
		if err == nil && !pending {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	var ids []string
	for _, sb := range list {
		if sb.Node != x || sb.State != api.StateError {
			continue
		}
		f.mu.Lock()
		m := f.sbs[sb.Name]
		f.mu.Unlock()
		if m == nil {
			continue
		}
		if strings.Contains(sb.Reason, "nothing of it was uploaded") {
			f.mu.Lock()
			m.waitsForNode = x
			f.mu.Unlock()
			continue
		}
		ck := f.checkpointNamed(m, sb.Reason)
		err := f.call("recover", sb.Name, via, func(ctx context.Context) error {
			_, err := via.c.Recover(ctx, sb.Name, client.RecoverOptions{Mode: api.RecoverRollback})
			return err
		})
		if err != nil && strings.Contains(err.Error(), "nothing of it was uploaded") {
			f.mu.Lock()
			m.waitsForNode = x
			f.mu.Unlock()
			continue
		}
		if ck == "" {
			fmt.Fprintf(os.Stderr, "faults: %s's reason names no checkpoint the run saw made (%q): its writes are not checked from here\n", sb.Name, sb.Reason)
			f.mu.Lock()
			m.writes = nil
			f.mu.Unlock()
		} else {
			f.rolledBack(m, ck, err == nil)
		}
		if err == nil {
			ids = append(ids, sb.ID)
			f.heartbeat(via, m)
		}
	}
	return ids
}

// checkpointNamed finds, in a lost sandbox's reason, the checkpoint it
// names as its last upload, among those the run saw made.
func (f *faultRun) checkpointNamed(m *sbModel, reason string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := len(m.ckpts) - 1; i >= 0; i-- {
		if strings.Contains(reason, m.ckpts[i]) {
			return m.ckpts[i]
		}
	}
	return ""
}

// checkFenced looks, on lost node x whose engines lived on, at each
// recovered sandbox's old copy: its heartbeat file on x's disk must not
// change once another node brought the sandbox back.
func (f *faultRun) checkFenced(x *fnode, ids []string) {
	if len(ids) == 0 {
		return
	}
	before := map[string]time.Time{}
	for _, id := range ids {
		before[id] = mtime(x, id)
	}
	time.Sleep(3 * time.Second)
	engines := x.engines()
	for _, id := range ids {
		var insts []string
		for inst := range engines {
			if sid, _ := sandboxOf(inst); sid == id {
				insts = append(insts, inst)
			}
		}
		after := mtime(x, id)
		if !after.IsZero() && after.After(before[id]) {
			f.defect("wrong", "two live copies: sandbox %s (%s) was brought back on another node after node %s was declared lost, "+
				"and its old copy on %s runs on (instances %v; its /root/hb changed at %s)",
				f.nameOf(id), id, x.name, x.name, insts, f.since(after))
		}
	}
}

// mtime is when sandbox id's /root/hb on node n's disk last changed.
func mtime(n *fnode, id string) time.Time {
	fi, err := os.Stat(filepath.Join(n.dataDir, "pool", "sandboxes", id, "root", "hb"))
	if err != nil {
		return time.Time{}
	}
	return fi.ModTime()
}

// nameOf is the name the run knows sandbox id by, looked up by its node.
func (f *faultRun) nameOf(id string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, n := range f.nodes() {
		if list, err := n.c.ListSandboxes(ctx); err == nil {
			for _, sb := range list {
				if sb.ID == id {
					return sb.Name
				}
			}
		}
	}
	return "?"
}

// settle waits for the faults under way to end, makes sure every server
// and dend is up, and brings back what a lost node left in error.
func (f *faultRun) settle(ctx context.Context) {
	// PostgreSQL and MinIO are up: a fault that stops one starts it
	// again before it is done.
	f.bg.Wait()
	for _, n := range f.nodes() {
		if !n.isUp() {
			f.restart(n)
		}
	}
	time.Sleep(2 * f.o.lease)
	f.bg.Wait() // a dend that exited meanwhile
	var nl *api.NodeList
	f.call("nodes", "", f.fleet[0], func(ctx context.Context) (err error) {
		nl, err = f.fleet[0].c.Nodes(ctx)
		return err
	})
	for _, n := range f.fleet {
		if st := nodeState(nl, n.name); st == api.NodeLost {
			f.recoverLost(f.fleet[0], n.name)
		}
	}
	// Sandboxes a dend's slow restart left behind a lost node, brought
	// back by hand as an operator would.
	var list []api.Sandbox
	f.call("list", "", f.fleet[0], func(ctx context.Context) (err error) {
		list, err = f.fleet[0].c.ListSandboxes(ctx)
		return err
	})
	nodesInError := map[string]bool{}
	for _, sb := range list {
		if sb.State == api.StateError && strings.Contains(sb.Reason, "was lost") {
			nodesInError[sb.Node] = true
		}
	}
	for x := range nodesInError {
		f.recoverLost(f.fleet[0], x)
	}
}
