package httpapi

import (
	"fmt"
	"net/http"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/httpapi/httpx"
	"github.com/den-dev/den/internal/sandbox"
)

// setHarness gives a sandbox a harness, swapping the one it has on the
// sandbox as it is; a failed step is an error that names it, the
// sandbox rolled back.
func (s *server) setHarness(w http.ResponseWriter, r *http.Request) error {
	if s.rebase == nil {
		return httpx.NotEnabled("harness")
	}
	var req api.Harness
	if err := httpx.DecodeJSON(w, r, &req, s.maxJSONBytes); err != nil {
		return err
	}
	res, err := s.rebase.SetHarness(r.Context(), r.PathValue("name"), toHarness(req))
	if err != nil {
		return err
	}
	out := api.HarnessSet{
		Sandbox: s.toSandbox(res.Sandbox), Harness: *fromHarness(res.Sandbox.Spec.Harness),
		Checkpoint: res.Checkpoint.ID, Steps: mapSlice(res.Steps, fromStep), DurationMS: res.Duration.Milliseconds(),
	}
	return httpx.WriteJSON(w, http.StatusOK, out)
}

func (s *server) getHarness(w http.ResponseWriter, r *http.Request) error {
	sb, err := s.sandboxes.Get(r.Context(), r.PathValue("name"))
	if err != nil {
		return err
	}
	if sb.Spec.Harness == nil {
		return noHarness(sb.Name)
	}
	return httpx.WriteJSON(w, http.StatusOK, fromHarness(sb.Spec.Harness))
}

func (s *server) removeHarness(w http.ResponseWriter, r *http.Request) error {
	if s.rebase == nil {
		return httpx.NotEnabled("harness")
	}
	if _, err := s.rebase.RemoveHarness(r.Context(), r.PathValue("name")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func noHarness(name string) error {
	return errdefs.WithHint(errdefs.NotFound("sandbox %q has no harness", name),
		fmt.Sprintf("give it one with `den harness set %s --step CMD --service 'SVC=CMD'`", name))
}

func toHarness(h api.Harness) sandbox.Harness {
	out := sandbox.Harness{Steps: h.Steps, ConfigPaths: h.ConfigPaths}
	for _, sp := range h.Services {
		out.Services = append(out.Services, toServiceSpec(sp))
	}
	return out
}

func fromHarness(h *sandbox.Harness) *api.Harness {
	if h == nil {
		return nil
	}
	out := &api.Harness{Steps: h.Steps, ConfigPaths: h.ConfigPaths}
	for _, sp := range h.Services {
		out.Services = append(out.Services, api.ServiceSpec{
			Name: sp.Name, Argv: sp.Argv, User: sp.User, Cwd: sp.Cwd, Env: sp.Env,
			Restart: sp.Restart, ReadyPort: sp.ReadyPort, ReadyCmd: sp.ReadyCmd,
		})
	}
	return out
}

func toServiceSpec(req api.ServiceSpec) sandbox.ServiceSpec {
	return sandbox.ServiceSpec{
		Name: req.Name, Argv: req.Argv, User: req.User, Cwd: req.Cwd, Env: req.Env,
		Restart: req.Restart, ReadyPort: req.ReadyPort, ReadyCmd: req.ReadyCmd,
	}
}

func fromStep(st sandbox.StepResult) api.SetupStep {
	return api.SetupStep{Step: st.Step, Harness: st.Harness, Command: st.Command, Run: st.RunID, ExitCode: st.ExitCode,
		DurationMS: st.Duration.Milliseconds()}
}
