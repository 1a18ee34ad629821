// Package files serves the sandbox's files to the host, behind
// den-init's file routes (GET /v1/files/stat and the rest, see
// internal/guest/PROTOCOL.md): describing, reading and writing files
// durably with their owners, modes and user extended attributes, making
// directories, moving and removing, tar archives out and in, and watches
// of a directory's changes. A route done as a user (under /v1/as/{user})
// reaches it on a thread holding that user's credentials (users.RunAs),
// so the kernel refuses what the user could not do.
//
// It never starts, signals or waits for a process, keeps no state from one
// request to the next, and never checks tokens or writes error answers:
// internal/initd routes requests to it and answers the errors it returns.
// Extracting an archive never writes outside the directory it extracts
// into, whatever symlinks the tree or the archive holds (see extract).
package files

import "log/slog"

// Log keys.
const (
	keyErr  = "err"
	keyPath = "path"
)

// Server serves the file routes' requests.
type Server struct {
	etc string // holds the passwd and group files owners are named from
	log *slog.Logger
}

// New returns a Server that names owners from the passwd and group files
// in etc, the sandbox's own.
func New(etc string, log *slog.Logger) *Server {
	return &Server{etc: etc, log: log}
}
