package mcpserver

import (
	"context"
	"strconv"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

// Service is a long-lived process den keeps running in a sandbox.
type Service struct {
	Name     string   `json:"name"`
	Command  []string `json:"command"`
	Restart  string   `json:"restart" jsonschema:"always, on-failure or never"`
	State    string   `json:"state" jsonschema:"starting, running, ready, backoff, exited, failed or stopping; while the sandbox does not run, the sandbox's state"`
	Restarts int      `json:"restarts" jsonschema:"starts after the first since the sandbox booted"`
	PID      int      `json:"pid,omitempty"`
	RunID    string   `json:"run_id,omitempty" jsonschema:"the run of its current or last start: run_output reads its output"`
	// LastExit says how its last run ended.
	LastExit string     `json:"last_exit,omitempty" jsonschema:"how its last run ended, e.g. exit 1 or killed (KILL)"`
	Started  *time.Time `json:"started_at,omitempty"`
}

func serviceOf(s *api.Service) Service {
	out := Service{
		Name: s.Name, Command: s.Argv, Restart: s.Restart, State: s.State, Restarts: s.Restarts,
		PID: s.PID, RunID: s.RunID, Started: s.StartedAt,
	}
	if ex := s.LastExit; ex != nil {
		switch {
		case ex.Error != "":
			out.LastExit = "could not start: " + ex.Error
		case ex.Signal != "":
			out.LastExit = "killed (" + ex.Signal + ")"
		default:
			out.LastExit = "exit " + strconv.Itoa(ex.Code)
		}
	}
	return out
}

// ServiceList is service_list's result.
type ServiceList struct {
	Name     string    `json:"name" jsonschema:"the sandbox whose services these are"`
	Services []Service `json:"services"`
}

// ServiceAddInput is service_add's arguments.
type ServiceAddInput struct {
	Name      string            `json:"name" jsonschema:"the sandbox"`
	Service   string            `json:"service" jsonschema:"the service's name: lowercase letters, digits, '.', '_' or '-'"`
	Command   []string          `json:"command" jsonschema:"the program and its arguments, e.g. [\"python3\", \"-m\", \"http.server\", \"8000\"]"`
	User      string            `json:"user,omitempty" jsonschema:"run as this user (default the image's, else root)"`
	Cwd       string            `json:"cwd,omitempty" jsonschema:"working directory (default the image's, else /)"`
	Env       map[string]string `json:"env,omitempty" jsonschema:"environment variables on top of the sandbox's"`
	Restart   string            `json:"restart,omitempty" jsonschema:"always (default), on-failure or never"`
	ReadyPort int               `json:"ready_port,omitempty" jsonschema:"it is ready once this TCP port on 127.0.0.1 accepts"`
	ReadyCmd  string            `json:"ready_cmd,omitempty" jsonschema:"it is ready once this shell command exits 0"`
}

// ServiceRef names a service of a sandbox.
type ServiceRef struct {
	Name    string `json:"name" jsonschema:"the sandbox"`
	Service string `json:"service" jsonschema:"the service's name"`
}

// ServiceDone is service_remove's and service_restart's result.
type ServiceDone struct {
	Name    string `json:"name"`
	Service string `json:"service"`
	Done    string `json:"done" jsonschema:"removed or restarted"`
}

func (s *server) serviceTools(srv *mcp.Server) {
	add(s, srv, &mcp.Tool{
		Name:        "service_list",
		Title:       "List a sandbox's services",
		Description: "List the long-lived processes den keeps running in a sandbox, in the order they were added: their state, restarts, pid, how the last run ended, and the run whose output run_output reads.",
		Annotations: readOnly(),
	}, func(ctx context.Context, c *client.Client, _ *mcp.CallToolRequest, in SandboxRef) (ServiceList, error) {
		svcs, err := c.Services(ctx, in.Name)
		if err != nil {
			return ServiceList{}, err
		}
		out := ServiceList{Name: in.Name, Services: []Service{}}
		for i := range svcs {
			out.Services = append(out.Services, serviceOf(&svcs[i]))
		}
		return out, nil
	})

	add(s, srv, &mcp.Tool{
		Name:  "service_add",
		Title: "Keep a process running in a sandbox",
		Description: "Declare a service: a long-lived process (a server, an agent loop) den starts now and at every boot of the sandbox, " +
			"and starts again when it ends, by its restart policy, after a growing wait (1s up to 30s). It survives hibernation and forks. " +
			"Each start is a run: run_output reads its output.",
		Annotations: changes(false, false),
	}, func(ctx context.Context, c *client.Client, _ *mcp.CallToolRequest, in ServiceAddInput) (Service, error) {
		if len(in.Command) == 0 {
			return Service{}, invalid("no command: give command, the program and its arguments as a list")
		}
		svc, err := c.AddService(ctx, in.Name, api.ServiceSpec{
			Name: in.Service, Argv: in.Command, User: in.User, Cwd: in.Cwd, Env: in.Env,
			Restart: in.Restart, ReadyPort: in.ReadyPort, ReadyCmd: in.ReadyCmd,
		})
		if err != nil {
			return Service{}, err
		}
		return serviceOf(svc), nil
	})

	add(s, srv, &mcp.Tool{
		Name:        "service_restart",
		Title:       "Restart a service",
		Description: "Stop a service's current run (SIGTERM, then SIGKILL after 5 seconds) and start it again at once, whatever its restart policy.",
		Annotations: changes(true, false),
	}, func(ctx context.Context, c *client.Client, _ *mcp.CallToolRequest, in ServiceRef) (ServiceDone, error) {
		if err := c.RestartService(ctx, in.Name, in.Service); err != nil {
			return ServiceDone{}, err
		}
		return ServiceDone{Name: in.Name, Service: in.Service, Done: "restarted"}, nil
	})

	add(s, srv, &mcp.Tool{
		Name:        "service_remove",
		Title:       "Stop and remove a service",
		Description: "Stop a service (SIGTERM, then SIGKILL after 5 seconds) and remove it from the sandbox's record: it is not started again.",
		Annotations: changes(true, true),
	}, func(ctx context.Context, c *client.Client, _ *mcp.CallToolRequest, in ServiceRef) (ServiceDone, error) {
		if err := c.RemoveService(ctx, in.Name, in.Service); err != nil {
			return ServiceDone{}, err
		}
		return ServiceDone{Name: in.Name, Service: in.Service, Done: "removed"}, nil
	})
}
