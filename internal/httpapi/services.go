package httpapi

import (
	"context"
	"net/http"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/internal/httpapi/httpx"
	"github.com/den-dev/den/internal/sandbox"
	"github.com/den-dev/den/internal/servicing"
)

// ServiceVerbs are the verbs of a sandbox's services.
// *servicing.Service implements it.
type ServiceVerbs interface {
	Services(ctx context.Context, ref string) ([]servicing.State, error)
	AddService(ctx context.Context, ref string, sp sandbox.ServiceSpec) (*sandbox.Sandbox, error)
	RemoveService(ctx context.Context, ref, name string) (*sandbox.Sandbox, error)
	RestartService(ctx context.Context, ref, name string) error
}

func (s *server) serviceVerbs() (ServiceVerbs, error) {
	if s.services == nil {
		return nil, httpx.NotEnabled("services")
	}
	return s.services, nil
}

func (s *server) listServices(w http.ResponseWriter, r *http.Request) error {
	v, err := s.serviceVerbs()
	if err != nil {
		return err
	}
	sts, err := v.Services(r.Context(), r.PathValue("name"))
	if err != nil {
		return err
	}
	return httpx.WriteJSON(w, http.StatusOK, api.ServiceList{Services: mapSlice(sts, ToService)})
}

func (s *server) addService(w http.ResponseWriter, r *http.Request) error {
	v, err := s.serviceVerbs()
	if err != nil {
		return err
	}
	var req api.ServiceSpec
	if err := httpx.DecodeJSON(w, r, &req, s.maxJSONBytes); err != nil {
		return err
	}
	sp := toServiceSpec(req)
	if _, err := v.AddService(r.Context(), r.PathValue("name"), sp); err != nil {
		return err
	}
	sts, err := v.Services(r.Context(), r.PathValue("name"))
	if err != nil {
		return err
	}
	for _, st := range sts {
		if st.Name == sp.Name {
			return httpx.WriteJSON(w, http.StatusCreated, ToService(st))
		}
	}
	return httpx.WriteJSON(w, http.StatusCreated, ToService(servicing.State{ServiceSpec: sp}))
}

func (s *server) removeService(w http.ResponseWriter, r *http.Request) error {
	v, err := s.serviceVerbs()
	if err != nil {
		return err
	}
	if _, err := v.RemoveService(r.Context(), r.PathValue("name"), r.PathValue("svc")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *server) restartService(w http.ResponseWriter, r *http.Request) error {
	v, err := s.serviceVerbs()
	if err != nil {
		return err
	}
	if err := v.RestartService(r.Context(), r.PathValue("name"), r.PathValue("svc")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// ToService is a service's wire form.
func ToService(st servicing.State) api.Service {
	out := api.Service{
		Name: st.Name, Argv: st.Argv, User: st.User, Cwd: st.Cwd, Env: st.Env,
		Restart: st.Restart, ReadyPort: st.ReadyPort, ReadyCmd: st.ReadyCmd,
		State: st.State, Harness: st.Harness, Restarts: st.Restarts, RunID: st.RunID, PID: st.PID,
		StartedAt: st.StartedAt, NextStart: st.Next,
	}
	if ex := st.LastExit; ex != nil {
		out.LastExit = &api.ServiceExit{Code: ex.Code, Signal: ex.Signal, Error: ex.Error, At: ex.At}
	}
	return out
}
