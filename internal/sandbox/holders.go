package sandbox

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/guest"
)

// A secret reaches a command at exec time and lives in that command's
// memory for as long as it runs. Saving the sandbox's memory then would
// write the secret to disk (a hibernation image, a checkpoint) or copy it
// into a fork, so den does not: while a process that may hold a secret is
// alive (den-init marks those started with secrets and everything they
// start, in a way nothing in the sandbox can undo, and knows their
// process groups and sessions), hibernating, checkpointing
// with memory and forking with processes are refused, saying which
// processes and what to do instead. The idle policy then leaves the
// sandbox paused in RAM, and tries again after another idle period.
// Files-only checkpoints, pausing in RAM, and everything else go on.
//
// Once no such process is left, the secret files and den-init's freed
// memory (which may still hold output a command printed) are scrubbed
// before the memory is saved.

// secretState is what dend knows of the secrets an instance's commands
// were given. An instance dend knows nothing of (found again after a
// restart) may have both.
type secretState struct {
	holders bool // a process given secrets may still run: ask first
	residue bool // secret files or printed output may be left: scrub first
}

func (s *Service) secretStateOf(sb *Sandbox) secretState {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.secretStates[sb.InstanceID()]
	if !ok {
		return secretState{holders: true, residue: true}
	}
	return st
}

func (s *Service) setSecretState(sb *Sandbox, st secretState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.secretStates[sb.InstanceID()] = st
}

// readyToSave makes sb's memory safe to save, or returns the processes
// that make it unsafe. A paused sandbox is thawed for it and frozen
// again. The caller holds sb's lifecycle lock, so no command starts
// meanwhile.
func (s *Service) readyToSave(ctx context.Context, sb *Sandbox) ([]guest.Process, error) {
	st := s.secretStateOf(sb)
	if (!st.holders && !st.residue) || (sb.State != StateRunning && sb.State != StatePaused) {
		return nil, nil
	}
	if sb.State == StatePaused {
		inst := sb.InstanceID()
		if err := s.cfg.Runtime.Resume(ctx, inst); err != nil {
			return nil, fmt.Errorf("thawing the sandbox to clear secrets from its memory: %w", err)
		}
		defer func() {
			if err := s.cfg.Runtime.Pause(context.WithoutCancel(ctx), inst); err != nil {
				s.log.Error("freezing the sandbox again", "sandbox", sb.Name, "err", err)
			}
		}()
	}
	g := s.guestFor(sb)
	if st.holders {
		procs, err := g.Processes(ctx)
		if err != nil {
			return nil, fmt.Errorf("looking for processes holding secrets: %w", err)
		}
		var holders []guest.Process
		for _, p := range procs {
			if p.Secrets {
				holders = append(holders, p)
			}
		}
		if len(holders) > 0 {
			return holders, nil
		}
		st.holders = false
		s.setSecretState(sb, st)
	}
	if st.residue {
		if err := scrub(ctx, g); err != nil {
			return nil, fmt.Errorf("clearing secrets from the sandbox's memory: %w", err)
		}
		st.residue = false
		s.setSecretState(sb, st)
	}
	return nil, nil
}

// scrub has den-init clear secrets from its memory. The connections that
// carried output go first: their buffers, den-init's and its network
// stack's, may hold what a command printed.
//
// A den-init from before scrubbing existed (restored from an older image)
// answers not found: its secret files are removed one by one instead,
// which is all that den-init could do.
func scrub(ctx context.Context, g Guest) error {
	closeGuest(g)
	err := g.Scrub(ctx)
	if !errors.Is(err, errdefs.ErrNotFound) {
		return err
	}
	ents, err := g.ReadDir(ctx, guest.SecretDir)
	if err != nil {
		return nil // no mount, or nothing was ever written
	}
	for _, e := range ents {
		if err := g.Remove(ctx, path.Join(guest.SecretDir, e.Name), false); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			return fmt.Errorf("removing secret file %s: %w", e.Name, err)
		}
	}
	return nil
}

// refuseSecretCapture fails when saving sb's memory, to do what (e.g.
// "hibernating"), would save a secret a process holds; else it readies
// the memory to be saved.
func (s *Service) refuseSecretCapture(ctx context.Context, sb *Sandbox, what, instead string) error {
	holders, err := s.readyToSave(ctx, sb)
	if err != nil || len(holders) == 0 {
		return err
	}
	err = errdefs.Conflict("%s sandbox %q would save secrets to disk: %s", what, sb.Name, describeHolders(holders))
	return errdefs.WithHint(err, fmt.Sprintf("end them first (`den exec %s -- kill PID`) or %s; "+
		"den never saves the memory of a process started with secrets", sb.Name, instead))
}

// describeHolders names the processes holding secrets, for an error or an
// event: "2 processes hold them (pid 12 `server --port 80`, pid 13 `sh`)".
func describeHolders(holders []guest.Process) string {
	const most = 3
	var names []string
	for i, p := range holders {
		if i == most {
			names = append(names, fmt.Sprintf("%d more", len(holders)-most))
			break
		}
		cmd := p.Command
		if cmd == "" {
			cmd = p.Name
		}
		if len(cmd) > 40 {
			cmd = cmd[:37] + "..."
		}
		names = append(names, "pid "+strconv.Itoa(p.PID)+" `"+cmd+"`")
	}
	verb := "processes hold them"
	if len(holders) == 1 {
		verb = "process holds them"
	}
	return fmt.Sprintf("%d %s (%s)", len(holders), verb, strings.Join(names, ", "))
}
