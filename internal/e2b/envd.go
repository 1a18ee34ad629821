package e2b

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path"
	"strings"

	"connectrpc.com/connect"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
	"github.com/den-dev/den/internal/e2b/envdpb/filesystem/filesystemconnect"
	"github.com/den-dev/den/internal/e2b/envdpb/process/processconnect"
)

// The envd plane: what E2B's agent inside a sandbox answers, answered by
// dend for the sandbox E2b-Sandbox-Id names. A sandbox that is unknown,
// another owner's or not running gets 502, as from E2B's proxy: the SDK
// reads it as "not running", and den does not wake a sandbox E2B paused.
// One on its way to sleep or destruction (pending) is not running either:
// streams it cuts are followed at once by the SDK's /health.

// maxRPCBytes bounds one RPC message (SendInput's data is the largest).
const maxRPCBytes = 16 << 20

// target is the sandbox an envd request is for, and how to reach it.
type target struct {
	c  *client.Client
	sb *api.Sandbox
	// user is who the caller asked to act as (Basic auth on RPCs,
	// ?username= on /files); "" is the sandbox's default user.
	user string
}

type targetKey struct{}

func targetOf(ctx context.Context) *target { return ctx.Value(targetKey{}).(*target) }

func (d *Door) envdRoutes() http.Handler {
	opts := []connect.HandlerOption{connect.WithReadMaxBytes(maxRPCBytes)}
	mux := http.NewServeMux()
	mux.Handle(processconnect.NewProcessHandler(&processes{d: d}, opts...))
	mux.Handle(filesystemconnect.NewFilesystemHandler(&filesystem{d: d}, opts...))
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	mux.HandleFunc("GET /files", d.download)
	mux.HandleFunc("POST /files", d.upload)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(headerSandboxID)
		if _, pattern := mux.Handler(r); pattern == "" {
			d.envdError(w, r, &client.Error{API: &api.Error{Code: api.CodeNotFound,
				Message: r.Method + " " + r.URL.Path + " is not part of the envd API den serves"}})
			return
		}
		if isRPC(r) && r.ContentLength > maxRPCBytes {
			// Said in den's words, before connect-go says it in its own.
			d.envdError(w, r, tooLargeRPC(r.ContentLength))
			return
		}
		if id == "" { // a signed URL on E2B_SANDBOX_URL, which names no sandbox
			found, err := d.signedSandbox(r)
			if err != nil {
				d.envdError(w, r, err)
				return
			}
			if found == "" {
				d.envdError(w, r, badSignature("invalid signature: no running sandbox signed this file, operation and user"))
				return
			}
			id = found
		}
		c, sb, err := d.envdCaller(r, id)
		if errors.Is(err, errNotRunning) {
			writeNotFound(w, id)
			return
		}
		if err != nil {
			d.envdError(w, r, err)
			return
		}
		t := &target{c: c, sb: sb}
		if isRPC(r) {
			t.user, _, _ = r.BasicAuth()
		} else {
			t.user = r.URL.Query().Get("username")
		}
		mux.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), targetKey{}, t)))
	})
}

// isRPC reports whether r is a Connect call (else /files or /health).
func isRPC(r *http.Request) bool {
	return strings.HasPrefix(r.URL.Path, "/process.Process/") || strings.HasPrefix(r.URL.Path, "/filesystem.Filesystem/")
}

// envdError answers a failure before the call reached its handler: as a
// Connect error to an RPC, else as {code, message}.
func (d *Door) envdError(w http.ResponseWriter, r *http.Request, err error) {
	if !isRPC(r) {
		d.writeError(w, r, err)
		return
	}
	var cerr *connect.Error
	if !errors.As(rpcError(err), &cerr) {
		d.writeError(w, r, err)
		return
	}
	status := http.StatusInternalServerError
	switch cerr.Code() {
	case connect.CodeInvalidArgument:
		status = http.StatusBadRequest
	case connect.CodeUnauthenticated:
		status = http.StatusUnauthorized
	case connect.CodePermissionDenied:
		status = http.StatusForbidden
	case connect.CodeNotFound:
		status = http.StatusNotFound
	case connect.CodeUnavailable:
		status = http.StatusServiceUnavailable
	case connect.CodeResourceExhausted:
		status = http.StatusTooManyRequests // Connect's mapping
	}
	writeJSON(w, status, struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}{cerr.Code().String(), cerr.Message()})
}

// defaultUser is the user a sandbox's commands run as when the caller
// names none: the image's (user on e2b-base), else root.
func defaultUser(sb *api.Sandbox) string {
	if sb.Image == "e2b-base" {
		return "user"
	}
	return "root"
}

// home is the home directory of user, where relative paths start and
// commands run by default.
func home(user string) string {
	switch user {
	case "root", "0":
		return "/root"
	}
	return "/home/" + user
}

// userOf is who t's caller acts as.
func (t *target) userOf() string {
	if t.user != "" {
		return t.user
	}
	return defaultUser(t.sb)
}

// files is den's client for the file calls of t's caller: done in the
// sandbox as the user they act as, with that user's permissions, as
// envd's are. Root's are den's plain file calls, which a den-init from
// before acting as a user serves too. Writes, MakeDir and Move ask for
// parents_by_root: envd makes missing directories as root and gives
// them to the user (writing /0/x.txt as user works), and so does den.
func (t *target) files() *client.Client {
	switch user := t.userOf(); user {
	case "root", "0":
		return t.c
	default:
		return t.c.FilesAs(user)
	}
}

// abs resolves p as E2B does: relative to the user's home.
func (t *target) abs(p string) string {
	if p == "" {
		return home(t.userOf())
	}
	if !path.IsAbs(p) {
		p = path.Join(home(t.userOf()), p)
	}
	return path.Clean(p)
}

// tooLargeRPC refuses an RPC whose message is over maxRPCBytes, as
// Connect does (resource_exhausted), in den's words.
func tooLargeRPC(n int64) error {
	return connect.NewError(connect.CodeResourceExhausted, fmt.Errorf(
		"this call's message is %d bytes, over the %d den takes in one\nhint: send less at once: files go through files.write (/files), and input through several sendInput calls",
		n, maxRPCBytes))
}
