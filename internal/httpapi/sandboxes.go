package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/internal/auth"
	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/httpapi/httpx"
	"github.com/den-dev/den/internal/idle"
	"github.com/den-dev/den/internal/sandbox"
)

func (s *server) createSandbox(w http.ResponseWriter, r *http.Request) error {
	if sent, err := s.placeCreate(w, r); sent || err != nil {
		return err
	}
	var req api.CreateSandboxRequest
	if err := httpx.DecodeJSON(w, r, &req, s.maxJSONBytes); err != nil {
		return err
	}
	httpx.NoteSandbox(r, "", req.Name)
	if req.Node != "" && s.nodes != nil && req.Node != s.fleetAPI.SelfName(r.Context()) {
		return errdefs.WithHint(errdefs.NotFound("no node %q here: this is node %s", req.Node, s.fleetAPI.SelfName(r.Context())),
			"`den node ls` lists the nodes")
	}
	p, err := toCreateParams(req)
	if err != nil {
		return err
	}
	who := httpx.PrincipalOf(r)
	if len(p.Secrets) > 0 && !who.Scope.Admin() {
		return errdefs.WithHint(auth.Forbidden("only an admin can grant secrets"),
			"create the sandbox without secrets and have an admin grant them: `den secret grant SANDBOX NAME`")
	}
	p.Owner = who.Owner
	if p.From, err = s.scopeFrom(r.Context(), who, p.From); err != nil {
		return err
	}
	sb, err := s.sandboxes.Create(r.Context(), p)
	if err != nil {
		return err
	}
	httpx.NoteSandbox(r, sb.ID, sb.Name)
	return httpx.WriteJSON(w, http.StatusCreated, s.toSandbox(sb))
}

// listSandboxes lists the sandboxes the caller may see.
func (s *server) listSandboxes(w http.ResponseWriter, r *http.Request) error {
	sbs, err := s.sandboxes.List(r.Context())
	if err != nil {
		return err
	}
	sbs = visible(httpx.PrincipalOf(r), sbs)
	return httpx.WriteJSON(w, http.StatusOK, api.SandboxList{Sandboxes: mapSlice(sbs, s.toSandbox)})
}

// getSandbox answers with the sandbox and what it uses now.
func (s *server) getSandbox(w http.ResponseWriter, r *http.Request) error {
	usage, err := httpx.QueryBoolDefault(r, "usage", true)
	if err != nil {
		return err
	}
	sb, err := s.sandboxes.Get(r.Context(), r.PathValue("name"))
	if err != nil {
		return err
	}
	out := s.toSandbox(sb)
	if !usage {
		return httpx.WriteJSON(w, http.StatusOK, out)
	}
	use, _ := s.sandboxes.Resources(r.Context(), sb)
	out.Usage = &api.Usage{CPUSeconds: use.CPUTime.Seconds(), MemoryBytes: use.MemoryBytes, PIDs: use.PIDs, DiskBytes: use.DiskBytes,
		RunOutputBytes: use.RunOutput, RunOutputLimitBytes: use.RunOutputLimit}
	return httpx.WriteJSON(w, http.StatusOK, out)
}

func (s *server) startSandbox(w http.ResponseWriter, r *http.Request) error {
	return s.answerSandbox(w, r, s.sandboxes.Start)
}

func (s *server) stopSandbox(w http.ResponseWriter, r *http.Request) error {
	return s.answerSandbox(w, r, s.sandboxes.Stop)
}

// answerSandbox calls a verb that takes a sandbox ref and returns the
// sandbox, and answers with it.
func (s *server) answerSandbox(w http.ResponseWriter, r *http.Request, verb func(ctx context.Context, ref string) (*sandbox.Sandbox, error)) error {
	sb, err := verb(r.Context(), r.PathValue("name"))
	if err != nil {
		return err
	}
	return httpx.WriteJSON(w, http.StatusOK, s.toSandbox(sb))
}

func (s *server) removeSandbox(w http.ResponseWriter, r *http.Request) error {
	force, err := httpx.QueryBool(r, "force")
	if err != nil {
		return err
	}
	if err := s.sandboxes.Remove(r.Context(), r.PathValue("name"), force); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *server) listEvents(w http.ResponseWriter, r *http.Request) error {
	evs, err := s.sandboxes.Events(r.Context(), r.PathValue("name"))
	if err != nil {
		return err
	}
	return httpx.WriteJSON(w, http.StatusOK, api.EventList{Events: mapSlice(evs, toEvent)})
}

// sandboxMetrics answers the samples of a sandbox, from and to RFC 3339
// times when given.
func (s *server) sandboxMetrics(w http.ResponseWriter, r *http.Request) error {
	if s.samples == nil {
		return httpx.NotEnabled("metrics")
	}
	var bounds [2]time.Time
	for i, name := range []string{"from", "to"} {
		if v := r.URL.Query().Get(name); v != "" {
			t, err := time.Parse(time.RFC3339, v)
			if err != nil {
				return httpx.InvalidQuery(name, v, "use an RFC 3339 time such as 2024-05-01T12:00:00Z")
			}
			bounds[i] = t
		}
	}
	smps, err := s.samples.Metrics(r.Context(), r.PathValue("name"), bounds[0], bounds[1])
	if err != nil {
		return err
	}
	out := api.MetricsList{Samples: make([]api.MetricSample, 0, len(smps))}
	for _, m := range smps {
		out.Samples = append(out.Samples, api.MetricSample{At: m.At.UTC(), CPUPercent: m.CPUPercent, CPUs: m.CPUs,
			MemoryBytes: m.MemoryBytes, MemoryLimit: m.MemoryLimit, DiskBytes: m.DiskBytes, DiskLimit: m.DiskLimit})
	}
	return httpx.WriteJSON(w, http.StatusOK, out)
}

func (s *server) pauseSandbox(w http.ResponseWriter, r *http.Request) error {
	return s.answerSandbox(w, r, s.sandboxes.Pause)
}

func (s *server) resumeSandbox(w http.ResponseWriter, r *http.Request) error {
	return s.answerSandbox(w, r, s.sandboxes.Resume)
}

func (s *server) hibernateSandbox(w http.ResponseWriter, r *http.Request) error {
	return s.answerSandbox(w, r, s.sandboxes.Hibernate)
}

// RecoverService brings a sandbox in error back. *recovery.Service
// implements it.
type RecoverService interface {
	RecoverSandbox(ctx context.Context, ref string, p sandbox.RecoverParams) (*sandbox.Sandbox, error)
}

func (s *server) recoverSandbox(w http.ResponseWriter, r *http.Request) error {
	if s.recovery == nil {
		return httpx.NotEnabled("recoveries")
	}
	var req api.RecoverRequest
	if err := httpx.DecodeJSON(w, r, &req, s.maxJSONBytes); err != nil {
		return err
	}
	sb, err := s.recovery.RecoverSandbox(r.Context(), r.PathValue("name"),
		sandbox.RecoverParams{Mode: req.Mode, Checkpoint: req.Checkpoint})
	if err != nil {
		return err
	}
	return httpx.WriteJSON(w, http.StatusOK, s.toSandbox(sb))
}

// PolicyService changes sandboxes' idle policies. *idling.Loop
// implements it.
type PolicyService interface {
	// SetPolicy changes the fields of a sandbox's idle policy that p sets.
	SetPolicy(ctx context.Context, ref string, p idle.Policy) (*sandbox.Sandbox, error)
}

// setPolicy changes only the fields the body carries: an absent field
// keeps its value.
func (s *server) setPolicy(w http.ResponseWriter, r *http.Request) error {
	if s.policies == nil {
		return httpx.NotEnabled("idle policies")
	}
	var req api.Policy
	if err := httpx.DecodeJSON(w, r, &req, s.maxJSONBytes); err != nil {
		return err
	}
	p, err := toPolicy(req, "")
	if err != nil {
		return err
	}
	sb, err := s.policies.SetPolicy(r.Context(), r.PathValue("name"), p)
	if err != nil {
		return err
	}
	return httpx.WriteJSON(w, http.StatusOK, s.toSandbox(sb))
}
