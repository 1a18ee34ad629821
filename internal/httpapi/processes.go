package httpapi

import (
	"net/http"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/internal/httpapi/httpx"
)

// listProcesses lists a sandbox's processes, waking it if it sleeps.
func (s *server) listProcesses(w http.ResponseWriter, r *http.Request) error {
	procs, err := s.runs.Processes(r.Context(), r.PathValue("name"))
	if err != nil {
		return err
	}
	out := api.ProcessList{Processes: make([]api.Process, 0, len(procs))}
	for _, p := range procs {
		out.Processes = append(out.Processes, api.Process(p))
	}
	return httpx.WriteJSON(w, http.StatusOK, out)
}
