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
	// User, when set, owns the directories made (a name, uid, or either
	// with :group, as ProcSpec.User); else den-init's user does.
	User string `json:"user,omitempty"`
	// ParentsByRoot, with Parents, for a call done as a user (AsUser):
	// the directories missing are made by root and given to the user, as
	// E2B's envd does, where the user could not make them; the user must
	// still reach the existing ones. A den-init from before makes them as
	// the user.
	ParentsByRoot bool `json:"parents_by_root,omitempty"`
}

// WriteOptions are the options of PUT /v1/files/content.
type WriteOptions struct {
	// Mode is the permission bits; 0 keeps those of the file replaced,
	// or 0644 for a new one.
	Mode uint32
	// User, when set, owns the file written (a name, uid, or either with
	// :group); else it keeps the owner of the file it replaces, or
	// den-init's user for a new one.
	User string
	// Parents makes the missing directories above the file (mode 0755,
	// owned by User when set) instead of refusing with not found.
	Parents bool
	// ParentsByRoot, with Parents, for a call done as a user (AsUser):
	// the directories missing are made by root and given to the user (as
	// MkdirRequest's); the file is still written as the user.
	ParentsByRoot bool
	// Xattrs are user attributes (user.*) to set on the file, over
	// those of the file it replaces, which it keeps.
	Xattrs map[string]string
	// DropXattrs, when set, is a prefix (user.…): the attributes of the
	// file replaced whose names start with it are not kept, as E2B's
	// metadata (user.e2b.*) is replaced by each write's.
	DropXattrs string
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
