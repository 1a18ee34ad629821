package api

// LimitsRequest is the body of PATCH /v1/sandboxes/{name}/limits: absent
// fields keep their value; pids 0 or disk "0" lift that limit.
type LimitsRequest struct {
	CPUs   *float64 `json:"cpus,omitempty"`
	Memory *string  `json:"memory,omitempty"` // e.g. "512M"
	PIDs   *int     `json:"pids,omitempty"`
	Disk   *string  `json:"disk,omitempty"` // e.g. "10G"; "0" lifts the cap
}

// Usage is what a sandbox uses now, against its limits (GET of one
// sandbox only). CPU, memory and processes are the engine's count for a
// running or paused sandbox; disk is the storage pool's.
type Usage struct {
	CPUSeconds  float64 `json:"cpu_seconds"` // CPU time since its instance booted
	MemoryBytes int64   `json:"memory_bytes"`
	PIDs        int     `json:"pids"`
	DiskBytes   int64   `json:"disk_bytes"`
	// RunOutputBytes is the output of its runs dend keeps on its own
	// disk, against RunOutputLimitBytes: older runs' output is pruned to
	// make room for newer.
	RunOutputBytes      int64 `json:"run_output_bytes"`
	RunOutputLimitBytes int64 `json:"run_output_limit_bytes"`
}

// Reasons a run was stopped by a limit (Run.LimitHit).
const (
	LimitMemory = "memory" // killed: out of memory
	LimitPIDs   = "pids"   // ran into the process limit
)
