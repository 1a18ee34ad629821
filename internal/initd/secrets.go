package initd

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"syscall"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/guest"
)

// A process given secrets is started through den-init's own binary in
// wrapper mode (SecretExecArg): it reads the secrets from a pipe, puts
// them in its environment or in files, and execs the command, whose
// memory replaces its own. den-init keeps the secrets only in one buffer
// it wipes once they are in the pipe, so no checkpoint of the sandbox
// holds them, unlike an environment den-init built itself (which Go would
// leave in its heap).

// SecretExecArg, as den-init's first argument, selects the wrapper:
// den-init SecretExecArg PATH ARGV0 ARGS... with the secrets on fd 3.
const SecretExecArg = "--den-secret-exec"

// maxSecretsBody bounds a secret-bearing start request.
const maxSecretsBody = 4 + guest.MaxJSONBody + 2*guest.SecretGuard + guest.MaxSecrets*(guest.MaxSecretBytes+7+4096)

// readSecretStart reads a start request of type guest.ContentTypeSecrets.
// The secrets in the spec alias the returned buffer: the caller wipes it
// once they are handed on. The frames are read straight into it, the
// guards around them keeping them out of the connection's read buffer.
func readSecretStart(r *http.Request) (guest.ProcSpec, []byte, error) {
	var spec guest.ProcSpec
	n := r.ContentLength
	if n < 4+2*guest.SecretGuard {
		return spec, nil, errdefs.Invalid("secret-bearing start request without a length, or too short")
	}
	if n > maxSecretsBody {
		return spec, nil, errdefs.TooLarge("request body is over the %d byte limit", maxSecretsBody)
	}
	var hdr [4]byte
	if _, err := io.ReadFull(r.Body, hdr[:]); err != nil {
		return spec, nil, errdefs.Invalid("reading request: %v", err)
	}
	jn := int64(binary.BigEndian.Uint32(hdr[:]))
	if jn > guest.MaxJSONBody || 4+jn+2*guest.SecretGuard > n {
		return spec, nil, errdefs.Invalid("process spec of %d bytes does not fit the request", jn)
	}
	js := make([]byte, jn)
	if _, err := io.ReadFull(r.Body, js); err != nil {
		return spec, nil, errdefs.Invalid("reading request: %v", err)
	}
	if err := json.Unmarshal(js, &spec); err != nil {
		return spec, nil, errdefs.Invalid("malformed JSON process spec: %v", err)
	}
	rest := make([]byte, n-4-jn)
	if _, err := io.ReadFull(r.Body, rest); err != nil {
		clear(rest)
		return spec, nil, errdefs.Invalid("reading request: %v", err)
	}
	frames := rest[guest.SecretGuard : len(rest)-guest.SecretGuard]
	secrets, err := guest.DecodeSecrets(frames)
	if err != nil {
		clear(rest)
		return spec, nil, err
	}
	spec.Secrets = secrets
	return spec, rest, nil
}

// wrapSecrets makes ex start the wrapper instead of the command, with the
// read end of a pipe as its fd 3; the write end is returned, for
// sendSecrets once the process is forked.
func (ex *execution) wrapSecrets(self string, argv []string) (*os.File, []string, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, nil, fmt.Errorf("creating secrets pipe: %w", err)
	}
	ex.childEnds = append(ex.childEnds, r)
	ex.attr.Files = append(ex.attr.Files, r.Fd())
	wargv := append([]string{self, SecretExecArg, ex.path}, argv...)
	ex.path = self
	return w, wargv, nil
}

// sendSecrets writes secrets into the wrapper's pipe and wipes its copy.
func sendSecrets(w *os.File, secrets []guest.Secret) error {
	defer w.Close()
	frames, err := guest.EncodeSecrets(secrets)
	defer clear(frames)
	if err != nil {
		return err
	}
	_, err = w.Write(frames)
	return err
}

// SecretExec is the wrapper: it marks itself as a holder (holdmark.go),
// reads secret frames from fd 3, sets the environment variables and
// writes the files they name, and execs args[0] with argv args[1:]. It
// returns only on failure.
func SecretExec(args []string) error {
	if len(args) < 2 {
		return errors.New("usage: den-init " + SecretExecArg + " PATH ARGV0 [ARGS...]")
	}
	// Marked before it has any secret, or it never gets them.
	if err := markHolder(); err != nil {
		return err
	}
	in := os.NewFile(3, "secrets")
	b, err := io.ReadAll(io.LimitReader(in, guest.MaxSecrets*(guest.MaxSecretBytes+4096)))
	in.Close()
	if err != nil {
		return fmt.Errorf("reading secrets: %w", err)
	}
	secrets, err := guest.DecodeSecrets(b)
	if err != nil {
		return err
	}
	env := os.Environ()
	for _, s := range secrets {
		if s.Env != "" {
			env = append(env, s.Env+"="+string(s.Value))
			continue
		}
		if err := writeSecretFile(s); err != nil {
			return err
		}
	}
	clear(b)
	return syscall.Exec(args[0], args[1:], env)
}

// writeSecretFile writes a secret file readable by this process's user
// only, replacing any earlier one.
func writeSecretFile(s guest.Secret) error {
	if err := os.MkdirAll(guest.SecretDir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", guest.SecretDir, err)
	}
	tmp := s.File + ".tmp"
	os.Remove(tmp)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o400)
	if err != nil {
		return fmt.Errorf("writing secret file %s: %w", s.File, err)
	}
	_, err = f.Write(s.Value)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, s.File)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing secret file %s: %w", s.File, err)
	}
	return nil
}

// handleScrub serves POST /v1/scrub, which the host calls before the
// sandbox's memory is saved: it removes the secret files, and gives back
// to the kernel the memory den-init freed, which may still hold output
// a command printed (Go does not zero freed memory; memory given back is
// not saved). Its own buffers it zeroes as it goes (see outBuf).
func (s *Server) handleScrub(w http.ResponseWriter, r *http.Request) error {
	ents, err := os.ReadDir(guest.SecretDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("reading %s: %w", guest.SecretDir, err)
	}
	for _, e := range ents {
		if err := os.Remove(filepath.Join(guest.SecretDir, e.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("removing secret file %s: %w", e.Name(), err)
		}
	}
	// Two collections (FreeOSMemory runs one): a sync.Pool, which holds
	// net/http's buffers, lets go of its items over two.
	runtime.GC()
	debug.FreeOSMemory()
	w.WriteHeader(http.StatusNoContent)
	return nil
}
