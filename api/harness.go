package api

// Harness is a sandbox's agent program, named apart from its
// environment: the body of PUT /v1/sandboxes/{name}/harness and the
// answer of GET. Setting it on a sandbox that has one swaps it on the
// sandbox as it is; a rebase runs its steps after the setup steps and
// starts its services with the sandbox's.
type Harness struct {
	// Steps are shell commands that install it, run in order.
	Steps []string `json:"steps,omitempty"`
	// Services are its long-lived processes, as the sandbox's own.
	Services []ServiceSpec `json:"services,omitempty"`
	// ConfigPaths are absolute paths where it keeps its configuration:
	// a rebase carries them over, as kept paths.
	ConfigPaths []string `json:"config_paths,omitempty"`
}

// HarnessSet is what setting a harness did.
type HarnessSet struct {
	Sandbox Sandbox `json:"sandbox"`
	Harness Harness `json:"harness"`
	// Checkpoint is the files-only checkpoint taken first, labelled
	// pre-harness-gN: `den restore NAME CHECKPOINT` undoes the swap.
	Checkpoint string      `json:"checkpoint"`
	Steps      []SetupStep `json:"steps,omitempty"`
	DurationMS int64       `json:"duration_ms"`
}
