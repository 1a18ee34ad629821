package api

// Process is one process running in a sandbox.
type Process struct {
	PID      int    `json:"pid"`
	PPID     int    `json:"ppid"`
	Name     string `json:"name"`    // the kernel's short name
	Command  string `json:"command"` // its arguments, space-separated
	State    string `json:"state"`   // R running, S sleeping, T stopped, ...
	RSSBytes int64  `json:"rss_bytes"`
	// Secrets marks a process that may hold a secret in its memory: one
	// started with secrets, or in its process group or session, or below
	// one of those, however it detached or moved (its mark, no_new_privs,
	// stays for good). While one runs, the sandbox's memory is not saved.
	Secrets bool `json:"secrets,omitempty"`
}

// ProcessList is the body of GET /v1/sandboxes/{name}/processes: every
// process but den-init, by pid. Asking wakes a paused or hibernated
// sandbox.
type ProcessList struct {
	Processes []Process `json:"processes"`
}
