package httpapi

import (
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/internal/guest"
	"github.com/den-dev/den/internal/sandbox"
)

// This file translates domain records to wire types and requests to
// domain parameters; nothing else in the package knows both shapes.

func (s *server) toSandbox(sb *sandbox.Sandbox) api.Sandbox {
	return api.Sandbox{
		ID:          sb.ID,
		Name:        sb.Name,
		Image:       sb.Spec.Image,
		CPUs:        sb.Spec.CPUs,
		MemoryBytes: sb.Spec.MemoryBytes,
		Env:         sb.Spec.Env,
		Labels:      sb.Spec.Labels,
		State:       string(sb.State),
		Reason:      sb.Reason,
		Generation:  sb.Generation,
		Address:     s.sandboxes.Address(sb),
		CreatedAt:   sb.CreatedAt,
		UpdatedAt:   sb.UpdatedAt,
	}
}

func toRun(r *sandbox.Run) api.Run {
	return api.Run{
		ID:         r.ID,
		Sandbox:    r.SandboxID,
		Generation: r.Generation,
		Argv:       r.Argv,
		Cwd:        r.Cwd,
		EnvNames:   r.EnvNames,
		User:       r.User,
		TTY:        r.TTY,
		Detached:   r.Detached,
		Status:     string(r.Status),
		ExitCode:   r.ExitCode,
		Signal:     r.Signal,
		StartedAt:  r.StartedAt,
		EndedAt:    r.EndedAt,
		StdoutSize: r.StdoutSize,
		StderrSize: r.StderrSize,
	}
}

func toEvent(ev sandbox.Event) api.Event {
	return api.Event{
		Seq:        ev.Seq,
		Time:       ev.Time,
		Type:       ev.Type,
		From:       string(ev.From),
		To:         string(ev.To),
		Generation: ev.Generation,
		Message:    ev.Message,
	}
}

func toImage(im *sandbox.Image) api.Image {
	return api.Image{
		Name:      im.Name,
		Source:    im.Source,
		Ref:       im.Ref,
		Digest:    im.Digest,
		SizeBytes: im.SizeBytes,
		Env:       im.Env,
		Cwd:       im.Cwd,
		User:      im.User,
		CreatedAt: im.CreatedAt,
	}
}

func toFileInfo(fi guest.FileInfo) api.FileInfo {
	return api.FileInfo{
		Name:    fi.Name,
		Path:    fi.Path,
		Size:    fi.Size,
		Mode:    fi.Mode,
		Type:    fi.Type,
		ModTime: fi.ModTime,
		Target:  fi.Target,
	}
}

// mapSlice converts every element of in; the result is never nil, so
// empty lists travel as [] rather than null.
func mapSlice[T, U any](in []T, f func(T) U) []U {
	out := make([]U, 0, len(in))
	for _, v := range in {
		out = append(out, f(v))
	}
	return out
}

// toCreateParams translates a create request; the service applies defaults
// and validates the rest.
func toCreateParams(req api.CreateSandboxRequest) (sandbox.CreateParams, error) {
	mem, err := sandbox.ParseMemory(req.Memory)
	if err != nil {
		return sandbox.CreateParams{}, err
	}
	return sandbox.CreateParams{
		Name:        req.Name,
		Image:       req.Image,
		CPUs:        req.CPUs,
		MemoryBytes: mem,
		Env:         req.Env,
		Labels:      req.Labels,
	}, nil
}

func toExecParams(req api.ExecRequest) sandbox.ExecParams {
	return sandbox.ExecParams{
		Argv:    req.Argv,
		Env:     req.Env,
		Cwd:     req.Cwd,
		User:    req.User,
		TTY:     req.TTY,
		Stdin:   req.Stdin,
		Rows:    req.Rows,
		Cols:    req.Cols,
		Timeout: time.Duration(req.Timeout),
		Detach:  req.Detach,
	}
}
