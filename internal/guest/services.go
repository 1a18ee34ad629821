package guest

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// ServiceSpec is one long-lived process den-init keeps running: the
// sandbox's record holds the list, and dend sends it whole at every boot
// and whenever it changes (PUT /v1/services).
type ServiceSpec struct {
	Name string   `json:"name"`
	Argv []string `json:"argv"`
	Env  []string `json:"env,omitempty"` // KEY=VALUE, the whole environment, as ProcSpec.Env
	Cwd  string   `json:"cwd,omitempty"`
	User string   `json:"user,omitempty"`
	// Restart is RestartAlways, RestartOnFailure or RestartNever.
	Restart string `json:"restart"`
	// ReadyPort, when set, is a TCP port on 127.0.0.1 the service is
	// ready once it accepts on; ReadyCmd, when set, a shell command that
	// says it is ready by exiting 0. Without either it is running as
	// soon as it started.
	ReadyPort int    `json:"ready_port,omitempty"`
	ReadyCmd  string `json:"ready_cmd,omitempty"`
}

// Restart policies.
const (
	RestartAlways    = "always"     // whatever way it ended
	RestartOnFailure = "on-failure" // when it exited non-zero or by a signal
	RestartNever     = "never"
)

// Service states (ServiceStatus.State).
const (
	ServiceStarting = "starting" // started; its readiness check has not passed yet
	ServiceRunning  = "running"  // started, with no readiness check
	ServiceReady    = "ready"    // its readiness check passed
	ServiceBackoff  = "backoff"  // ended; waits to be started again
	ServiceExited   = "exited"   // ended with 0, not to be started again
	ServiceFailed   = "failed"   // ended otherwise, or could not start, not to be started again
	ServiceStopping = "stopping" // being stopped: removed, restarted or shutting down
)

// ServiceExit is how a service's run ended.
type ServiceExit struct {
	Code   int       `json:"code"`             // -1 when a signal ended it
	Signal string    `json:"signal,omitempty"` // e.g. "KILL"
	Error  string    `json:"error,omitempty"`  // it could not be started: why
	At     time.Time `json:"at"`
}

// ServiceStatus is what den-init knows of one service.
type ServiceStatus struct {
	Name     string `json:"name"`
	State    string `json:"state"`
	Restarts int    `json:"restarts"` // starts after the first
	// RunID is the den-init process of its current (or last) run, which
	// dend records as a run of the same id; PID its pid while it runs.
	RunID     string       `json:"run_id,omitempty"`
	PID       int          `json:"pid,omitempty"`
	StartedAt *time.Time   `json:"started_at,omitempty"`
	LastExit  *ServiceExit `json:"last_exit,omitempty"`
	// Next is when a service in backoff starts again.
	Next *time.Time `json:"next,omitempty"`
}

// ServicesRequest is the body of PUT /v1/services.
type ServicesRequest struct {
	Services []ServiceSpec `json:"services"`
}

// Services is what GET and PUT /v1/services answer: every service, in
// the order given, and a version that grows with every change.
type Services struct {
	Version  uint64          `json:"version"`
	Services []ServiceStatus `json:"services"`
}

// ServicesWait is how long GET /v1/services?after=N waits for a change
// at most before it answers as it is.
const ServicesWait = 25 * time.Second

// SetServices makes den-init keep exactly specs running, in this order:
// new ones start, removed ones stop, changed ones start again with their
// new spec, and unchanged ones go on as they are. A den-init older than
// the verb answers NotFound.
func (c *Client) SetServices(ctx context.Context, specs []ServiceSpec) (Services, error) {
	var out Services
	if specs == nil {
		specs = []ServiceSpec{}
	}
	err := c.call(ctx, http.MethodPut, "/v1/services", nil, ServicesRequest{Services: specs}, &out)
	return out, err
}

// Services answers the services' states. With after > 0 it waits (up
// to ServicesWait) until the version is past after.
func (c *Client) Services(ctx context.Context, after uint64) (Services, error) {
	var out Services
	var q url.Values
	if after > 0 {
		q = url.Values{"after": {strconv.FormatUint(after, 10)}}
	}
	err := c.call(ctx, http.MethodGet, "/v1/services", q, nil, &out)
	return out, err
}

// RestartService stops a service's run, if it runs, and starts it again
// at once, whatever its policy.
func (c *Client) RestartService(ctx context.Context, name string) error {
	return c.call(ctx, http.MethodPost, "/v1/services/"+url.PathEscape(name)+"/restart", nil, nil, nil)
}
