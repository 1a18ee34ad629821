package guest

// Bodies of den-init's smaller requests, and the conventions both sides of
// the protocol share. PROTOCOL.md describes the routes that use them.

// MaxJSONBody is the largest JSON request body den-init reads; beyond it
// the answer is 413 too_large.
const MaxJSONBody = 1 << 20

// HeaderFileInfo carries the JSON FileInfo of the file whose content
// GET /v1/files/content returns.
const HeaderFileInfo = "X-Den-File-Info"

// AckRequest is the body of POST /v1/procs/{id}/ack: den-init may drop the
// output before these offsets.
type AckRequest struct {
	Stdout int64 `json:"stdout"`
	Stderr int64 `json:"stderr"`
}

// SignalRequest is the body of POST /v1/procs/{id}/signal.
type SignalRequest struct {
	Signal int `json:"signal"`
}

// ResizeRequest is the body of POST /v1/procs/{id}/resize.
type ResizeRequest struct {
	Rows uint16 `json:"rows"`
	Cols uint16 `json:"cols"`
}

// ShutdownRequest is the body of POST /v1/shutdown.
type ShutdownRequest struct {
	GraceMS int64 `json:"grace_ms"`
}

// MkdirRequest is the body of POST /v1/files/mkdir.
type MkdirRequest struct {
	Path    string `json:"path"`
	Parents bool   `json:"parents,omitempty"`
	Mode    uint32 `json:"mode,omitempty"` // default 0755
}

// MoveRequest is the body of POST /v1/files/move.
type MoveRequest struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// ErrorBody is what den-init sends on every non-2xx answer: Error and,
// when den-init knows how to fix it, a hint.
type ErrorBody struct {
	Error
	Hint string `json:"hint,omitempty"`
}
