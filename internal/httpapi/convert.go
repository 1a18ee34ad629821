package httpapi

import (
	"cmp"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/expose"
	"github.com/den-dev/den/internal/guest"
	"github.com/den-dev/den/internal/idle"
	"github.com/den-dev/den/internal/netpolicy"
	"github.com/den-dev/den/internal/sandbox"
)

// This file translates domain records to wire types and requests to
// domain parameters; nothing else in the package knows both shapes.

func (s *server) toSandbox(sb *sandbox.Sandbox) api.Sandbox {
	out := api.Sandbox{
		ID:            sb.ID,
		Name:          sb.Name,
		Owner:         sb.Owner,
		Image:         sb.Spec.Image,
		ImageVersion:  sb.Spec.ImageVersionOrFirst(),
		ImageOutdated: sb.Outdated(),
		Setup:         sb.Spec.Setup,
		Keep:          sb.Spec.KeptPaths(),
		Harness:       fromHarness(sb.Spec.Harness),
		CPUs:          sb.Spec.CPUs,
		MemoryBytes:   sb.Spec.MemoryBytes,
		PIDs:          sb.Spec.PIDs,
		DiskBytes:     sb.Spec.DiskBytes,
		Env:           sb.Spec.Env,
		Labels:        sb.Spec.Labels,
		State:         string(sb.State),
		Reason:        sb.Reason,
		Generation:    sb.Generation,
		Node:          sb.Node,
		Address:       s.sandboxes.Address(sb),
		Ephemeral:     sb.Spec.Ephemeral,
		Network:       fromNetwork(sb.Spec.Network),
		Secrets:       fromGrants(sb.Spec.Secrets),
		Ports:         fromPorts(sb.Spec.Ports),
		Policy:        fromPolicy(s.sandboxes.EffectivePolicy(sb)),
		RunningFor:    api.FormatDuration(sb.Usage.Ran(time.Now()).Round(time.Second)),
		Checkpoint:    sb.Checkpoint,
		Origin:        sb.Origin,
		Head:          sb.Head,
		Pending:       sb.Pending,
		CreatedAt:     sb.CreatedAt,
		UpdatedAt:     sb.UpdatedAt,
	}
	if due := s.sandboxes.Due(sb); due.Action != "" {
		out.Next = &api.NextAction{Action: due.Action, At: due.At}
	}
	return out
}

// fromPolicy writes an effective policy with every field set: a field
// without a value, even after dend's defaults, means never (or no bound).
func fromPolicy(p idle.Policy) api.Policy {
	dur := func(d *time.Duration) *string {
		s := "0"
		if d != nil {
			s = api.FormatDuration(*d)
		}
		return &s
	}
	out := api.Policy{
		PauseAfter:       dur(p.PauseAfter),
		HibernateAfter:   dur(p.HibernateAfter),
		StopAfter:        dur(p.StopAfter),
		TTL:              dur(p.TTL),
		BackgroundActive: new(false),
		WakeOnBoot:       new(false),
		KeepLast:         new(0),
		MaxAge:           dur(p.MaxAge),
	}
	if p.BackgroundActive != nil {
		*out.BackgroundActive = *p.BackgroundActive
	}
	if p.WakeOnBoot != nil {
		*out.WakeOnBoot = *p.WakeOnBoot
	}
	if p.KeepLast != nil {
		*out.KeepLast = *p.KeepLast
	}
	return out
}

// toPolicy reads a policy from the wire: only its durations are parsed
// here, absent fields stay nil, and the service validates the values.
// prefix goes before field names in errors ("policy." in a create).
func toPolicy(req api.Policy, prefix string) (idle.Policy, error) {
	p := idle.Policy{BackgroundActive: req.BackgroundActive, WakeOnBoot: req.WakeOnBoot, KeepLast: req.KeepLast}
	for _, f := range []struct {
		name string
		in   *string
		out  **time.Duration
	}{
		{"pause_after", req.PauseAfter, &p.PauseAfter},
		{"hibernate_after", req.HibernateAfter, &p.HibernateAfter},
		{"stop_after", req.StopAfter, &p.StopAfter},
		{"ttl", req.TTL, &p.TTL},
		{"max_age", req.MaxAge, &p.MaxAge},
	} {
		if f.in == nil {
			continue
		}
		d, err := time.ParseDuration(*f.in)
		if err != nil {
			return idle.Policy{}, errdefs.WithHint(errdefs.Invalid("invalid %s%s %q", prefix, f.name, *f.in),
				"use a duration like 90s, 15m or 2h, or 0 for never")
		}
		*f.out = &d
	}
	return p, nil
}

func toCheckpoint(c *sandbox.Checkpoint) api.Checkpoint {
	return api.Checkpoint{
		ID:            c.ID,
		Sandbox:       c.SandboxID,
		Name:          c.Name,
		Kind:          c.Kind,
		Parent:        c.Parent,
		Memory:        c.Memory,
		Generation:    c.Generation,
		EngineVersion: c.Manifest.Engine.Version,
		MemoryBytes:   c.Manifest.MemoryBytes,
		FilesBytes:    c.Manifest.FilesBytes,
		CreatedAt:     c.CreatedAt,
		NeededBy:      c.NeededBy,
		Location:      cmp.Or(c.Location, sandbox.LocationLocal),
		UploadedBytes: c.Blobs.SentBytes,
	}
}

func toRun(r *sandbox.Run) api.Run {
	return api.Run{
		ID:         r.ID,
		Sandbox:    r.SandboxID,
		Generation: r.Generation,
		PID:        r.PID,
		Argv:       r.Argv,
		Cwd:        r.Cwd,
		EnvNames:   r.EnvNames,
		Labels:     r.Labels,
		User:       r.User,
		TTY:        r.TTY,
		Detached:   r.Detached,
		Status:     string(r.Status),
		ExitCode:   r.ExitCode,
		Signal:     r.Signal,
		LimitHit:   r.LimitHit,
		StartedAt:  r.StartedAt,
		EndedAt:    r.EndedAt,
		StdoutSize: r.StdoutSize,
		StderrSize: r.StderrSize,

		StdoutDropped: r.StdoutDropped,
		StderrDropped: r.StderrDropped,
		OutputMax:     r.OutputMax,
		OutputCut:     r.OutputCut,
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
		Version:   max(im.Version, 1),
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
		UID:     fi.UID,
		GID:     fi.GID,
		Owner:   fi.Owner,
		Group:   fi.Group,
		Xattrs:  fi.Xattrs,
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
	disk, err := parseDisk(req.Disk)
	if err != nil {
		return sandbox.CreateParams{}, err
	}
	var pol idle.Policy
	if req.Policy != nil {
		if pol, err = toPolicy(*req.Policy, "policy."); err != nil {
			return sandbox.CreateParams{}, err
		}
	}
	var network *netpolicy.Policy
	if req.Network != nil {
		p, err := toNetwork(*req.Network)
		if err != nil {
			return sandbox.CreateParams{}, err
		}
		network = &p
	}
	return sandbox.CreateParams{
		Network:     network,
		Secrets:     toGrants(req.Secrets),
		Setup:       req.Setup,
		Keep:        req.Keep,
		Name:        req.Name,
		Image:       req.Image,
		CPUs:        req.CPUs,
		MemoryBytes: mem,
		PIDs:        req.PIDs,
		DiskBytes:   disk,
		Env:         req.Env,
		Labels:      req.Labels,
		From:        req.From,
		Ephemeral:   req.Ephemeral,
		Policy:      pol,
	}, nil
}

func toExecParams(req api.ExecRequest) (sandbox.ExecParams, error) {
	var outMax int64
	if req.OutputMax != "" {
		n, err := sandbox.ParseMemory(req.OutputMax)
		if err != nil {
			return sandbox.ExecParams{}, errdefs.WithHint(errdefs.Invalid("invalid output cap %q", req.OutputMax),
				"use a size like 1M or 16M per stream, or leave output_max out for dend's cap")
		}
		outMax = n
	}
	return sandbox.ExecParams{
		OutputMax: outMax,
		Argv:      req.Argv,
		Env:       req.Env,
		Cwd:       req.Cwd,
		User:      req.User,
		TTY:       req.TTY,
		Stdin:     req.Stdin,
		Rows:      req.Rows,
		Cols:      req.Cols,
		Timeout:   time.Duration(req.Timeout),
		Detach:    req.Detach,
		Labels:    req.Labels,
	}, nil
}

func fromPorts(in []expose.Port) []api.ExposedPort {
	var out []api.ExposedPort
	for _, p := range in {
		out = append(out, api.ExposedPort{Port: p.Port, Public: p.Public})
	}
	return out
}
