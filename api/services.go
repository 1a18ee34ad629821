package api

import "time"

// ServiceSpec is a service a sandbox's record declares: a long-lived
// process den-init keeps running, started at every boot in the order the
// services were added and again by its restart policy.
type ServiceSpec struct {
	Name string            `json:"name"`
	Argv []string          `json:"argv"`
	User string            `json:"user,omitempty"` // default: the image's user, else root
	Cwd  string            `json:"cwd,omitempty"`  // default: the image's working dir, else /
	Env  map[string]string `json:"env,omitempty"`  // on top of the image's and the sandbox's
	// Restart is "always" (the default), "on-failure" (after a non-zero
	// exit or a signal) or "never".
	Restart string `json:"restart,omitempty"`
	// ReadyPort is a TCP port on 127.0.0.1 that accepts once the service
	// is ready; ReadyCmd a shell command that exits 0 once it is. At
	// most one; without either it is "running" as soon as it started.
	ReadyPort int    `json:"ready_port,omitempty"`
	ReadyCmd  string `json:"ready_cmd,omitempty"`
}

// Service states, as den-init reports them; while the sandbox does not
// run, a service's state is the sandbox's (e.g. "stopped").
const (
	ServiceStarting = "starting" // started; its readiness check has not passed yet
	ServiceRunning  = "running"  // started, with no readiness check
	ServiceReady    = "ready"    // its readiness check passed
	ServiceBackoff  = "backoff"  // ended; waits to be started again
	ServiceExited   = "exited"   // ended with 0, not to be started again
	ServiceFailed   = "failed"   // ended otherwise, or could not start
	ServiceStopping = "stopping"
)

// Service is a service with its state.
type Service struct {
	Name      string            `json:"name"`
	Argv      []string          `json:"argv"`
	User      string            `json:"user,omitempty"`
	Cwd       string            `json:"cwd,omitempty"`
	Env       map[string]string `json:"env,omitempty"`
	Restart   string            `json:"restart"`
	ReadyPort int               `json:"ready_port,omitempty"`
	ReadyCmd  string            `json:"ready_cmd,omitempty"`
	State     string            `json:"state"`
	Harness   bool              `json:"harness,omitempty"` // the harness's, not the sandbox's own
	Restarts  int               `json:"restarts"`          // starts after the first, this boot
	// RunID is the run of its current (or last) start: `den logs` reads
	// its output. PID is its process while it runs.
	RunID     string       `json:"run_id,omitempty"`
	PID       int          `json:"pid,omitempty"`
	StartedAt *time.Time   `json:"started_at,omitempty"`
	LastExit  *ServiceExit `json:"last_exit,omitempty"`
	// NextStart is when a service in backoff starts again.
	NextStart *time.Time `json:"next_start,omitempty"`
}

// ServiceExit is how a service's last run ended.
type ServiceExit struct {
	Code   int       `json:"code"`             // -1 when a signal ended it
	Signal string    `json:"signal,omitempty"` // e.g. "KILL"
	Error  string    `json:"error,omitempty"`  // why it could not be started
	At     time.Time `json:"at"`
}

// ServiceList is the body of GET /v1/sandboxes/{name}/services.
type ServiceList struct {
	Services []Service `json:"services"`
}
