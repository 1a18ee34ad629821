package main

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

// engineKillLimit bounds each wait after a kill: past it the sample is
// the limit and the report counts it as not seen.
const engineKillLimit = 30 * time.Second

// engineKill measures how soon den tells that a sandbox's engine died:
// for each of b.n fresh sandboxes, it kills every host process of the
// instance with SIGKILL (as an operator's kill -9 or the OOM killer
// would), then from that moment polls the sandbox's state back to back
// until it is no longer running, and, at the same time, runs `true` in it
// over and over until an exec fails. Both are timed from the kill. The
// engine has nothing to compare with: a bare runsc tells no one.
func (b *bench) engineKill() error {
	var noticed, refused samples
	var unseen, neverFailed, procs int
	states := map[string]int{} // how many ended in each state
	var reason, execErr string // one of their reasons, and of the failed execs' errors
	for i := 0; i < b.n; i++ {
		name := "ek" + strconv.Itoa(i)
		r, err := b.killEngineOnce(name)
		b.d.c.RemoveSandbox(b.ctx, name, true)
		if err != nil {
			return err
		}
		noticed, refused = append(noticed, r.noticed), append(refused, r.refused)
		procs += r.procs
		if r.state == api.StateRunning {
			unseen++
		}
		if !r.failed {
			neverFailed++
		}
		states[r.state]++
		if r.reason != "" {
			reason = r.reason
		}
		if r.execErr != "" {
			execErr = r.execErr
		}
	}
	var reached []string
	for s, k := range states {
		reached = append(reached, fmt.Sprintf("%s %d of %d", s, k, b.n))
	}
	sort.Strings(reached)
	lines := []string{"state when the poll ended: " + strings.Join(reached, ", ")}
	if reason != "" {
		// The reason ends with the engine's log, different each time.
		reason, _, _ = strings.Cut(reason, "; its log ended")
		lines = append(lines, "reason, for one: "+reason)
	}
	if execErr != "" {
		lines = append(lines, "a failed exec, for one: "+execErr)
	}
	lines = append(lines, fmt.Sprintf("%.1f host processes killed per sandbox on average", float64(procs)/float64(max(b.n, 1))))
	if unseen > 0 || neverFailed > 0 {
		lines = append(lines, fmt.Sprintf("within %s of the kill: %d of %d still running, %d of %d still executing",
			engineKillLimit, unseen, b.n, neverFailed, b.n))
	}
	b.add(section{title: "engine killed (kill -9 of a running sandbox's runsc processes)", lines: lines, rows: []row{
		{op: "kill → state no longer running", den: noticed, goal: "≤ 1 s",
			note: "GetSandbox polled back to back; no engine counterpart"},
		{op: "kill → an exec fails", den: refused, goal: "≤ 2 s",
			note: "`true` run again until one fails; no engine counterpart"},
	}})
	return nil
}

// killResult is what one engine kill showed.
type killResult struct {
	noticed, refused time.Duration // from the kill
	state            string        // the state when the poll ended
	reason           string
	failed           bool   // an exec failed within engineKillLimit
	execErr          string // how it failed
	procs            int    // host processes killed
}

// killEngineOnce creates sandbox name, kills its engine and times what
// follows. The caller removes the sandbox.
func (b *bench) killEngineOnce(name string) (*killResult, error) {
	if err := b.createSmall(name, "256M"); err != nil {
		return nil, err
	}
	if _, err := b.exec(name, "true"); err != nil {
		return nil, err
	}
	inst, err := b.instanceOf(name)
	if err != nil {
		return nil, err
	}
	pids := processesWith(inst)
	if len(pids) == 0 {
		return nil, fmt.Errorf("no host process of %s's instance %s", name, inst)
	}
	ctx, cancel := context.WithTimeout(b.ctx, engineKillLimit)
	defer cancel()
	r := &killResult{procs: len(pids)}
	for _, pid := range pids {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	killed := time.Now()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		r.state = api.StateRunning
		for ctx.Err() == nil {
			sb, err := b.d.c.GetSandbox(ctx, name)
			if err == nil && sb.State != api.StateRunning {
				r.state, r.reason = sb.State, sb.Reason
				break
			}
		}
		r.noticed = time.Since(killed)
	}()
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			run, err := b.d.c.Exec(ctx, name, api.ExecRequest{Argv: []string{"true"}}, client.ExecIO{})
			ok := err == nil && run.ExitCode != nil && *run.ExitCode == 0
			if !ok && ctx.Err() == nil { // an error, or a run that ended lost
				r.failed = true
				if r.execErr = fmt.Sprint(err); err == nil {
					r.execErr = "the run ended " + run.Status
				}
				break
			}
		}
		r.refused = time.Since(killed)
	}()
	wg.Wait()
	return r, nil
}
