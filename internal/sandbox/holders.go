package sandbox

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/guest"
)

// A secret reaches a command at exec time and lives in that command's
// memory for as long as it runs. Saving the sandbox's memory then would
// write the secret to disk (a hibernation image, a checkpoint) or copy it
// into a fork, so den does not: while a process that may hold a secret is
// alive (den-init marks those started with secrets, their process groups
// and sessions, and everything below them), hibernating, checkpointing
// with memory and forking with processes are refused, saying which
// processes and what to do instead. The idle policy then leaves the
// sandbox paused in RAM, and tries again after another idle period.
// Files-only checkpoints, pausing in RAM, and everything else go on.

// setSecretFree records whether sb's instance is known to run no process
// that may hold a secret.
func (s *Service) setSecretFree(sb *Sandbox, free bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if free {
		s.secretFree[sb.InstanceID()] = true
	} else {
		delete(s.secretFree, sb.InstanceID())
	}
}

// secretHolders returns the processes of sb that may hold a secret. A
// paused sandbox is thawed for the question and frozen again. The caller
// holds sb's lifecycle lock.
func (s *Service) secretHolders(ctx context.Context, sb *Sandbox) ([]guest.Process, error) {
	s.mu.Lock()
	free := s.secretFree[sb.InstanceID()]
	s.mu.Unlock()
	if free || (sb.State != StateRunning && sb.State != StatePaused) {
		return nil, nil
	}
	if sb.State == StatePaused {
		inst := sb.InstanceID()
		if err := s.cfg.Runtime.Resume(ctx, inst); err != nil {
			return nil, fmt.Errorf("thawing the sandbox to look for processes holding secrets: %w", err)
		}
		defer func() {
			if err := s.cfg.Runtime.Pause(context.WithoutCancel(ctx), inst); err != nil {
				s.log.Error("freezing the sandbox again", "sandbox", sb.Name, "err", err)
			}
		}()
	}
	procs, err := s.guestFor(sb).Processes(ctx)
	if err != nil {
		return nil, fmt.Errorf("looking for processes holding secrets: %w", err)
	}
	var holders []guest.Process
	for _, p := range procs {
		if p.Secrets {
			holders = append(holders, p)
		}
	}
	if len(holders) == 0 {
		s.setSecretFree(sb, true)
	}
	return holders, nil
}

// refuseSecretCapture fails when saving sb's memory, to do what (e.g.
// "hibernating"), would save a secret a process holds.
func (s *Service) refuseSecretCapture(ctx context.Context, sb *Sandbox, what, instead string) error {
	holders, err := s.secretHolders(ctx, sb)
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
