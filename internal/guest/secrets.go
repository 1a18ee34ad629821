package guest

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"path"
	"strings"

	"github.com/den-dev/den/internal/errdefs"
)

// Secret is a value a process gets when it starts: as the environment
// variable Env, or as the file File (on the in-memory mount SecretDir).
// Secrets never travel as JSON, and den-init never builds an environment
// holding one: a copy left in its memory would be saved in every
// checkpoint. See EncodeStart.
type Secret struct {
	Env   string
	File  string
	Value []byte
}

// ContentTypeSecrets marks a POST /v1/procs body that carries secrets:
//
//	u32 length of the JSON ProcSpec | JSON ProcSpec | SecretGuard zero bytes |
//	secret frames | SecretGuard zero bytes
//
// A frame is: kind ('e' env, 'f' file) | u16 name length | name | u32 value
// length | value (big-endian lengths). The guards put the frames where the
// receiver's HTTP server reads straight into the receiver's own buffer,
// which it wipes, never through the connection's shared read buffer.
const ContentTypeSecrets = "application/x-den-proc-secrets"

// SecretGuard is the zero padding around a request's secret frames: more
// than an HTTP server's read buffer (4 KiB in Go's).
const SecretGuard = 8192

// SecretDir is the in-memory mount secret files are written in.
const SecretDir = "/run/secrets"

// Limits on secrets in one request.
const (
	MaxSecrets     = 64
	MaxSecretBytes = 64 << 10
)

// EncodeStart encodes a start request whose spec carries secrets.
func EncodeStart(spec ProcSpec) ([]byte, error) {
	js, err := json.Marshal(spec)
	if err != nil {
		return nil, fmt.Errorf("encoding process spec: %w", err)
	}
	frames, err := EncodeSecrets(spec.Secrets)
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, 4+len(js)+2*SecretGuard+len(frames))
	b = binary.BigEndian.AppendUint32(b, uint32(len(js)))
	b = append(b, js...)
	b = append(b, make([]byte, SecretGuard)...)
	b = append(b, frames...)
	b = append(b, make([]byte, SecretGuard)...)
	clear(frames)
	return b, nil
}

// EncodeSecrets writes secrets as frames, into a buffer allocated once at
// its final size: a buffer grown by append would leave copies of the first
// frames behind, unwiped.
func EncodeSecrets(secrets []Secret) ([]byte, error) {
	if len(secrets) > MaxSecrets {
		return nil, errdefs.TooLarge("%d secrets, over the limit of %d", len(secrets), MaxSecrets)
	}
	n := 0
	for _, s := range secrets {
		if err := s.check(); err != nil {
			return nil, err
		}
		n += 1 + 2 + len(s.Env) + len(s.File) + 4 + len(s.Value)
	}
	b := make([]byte, 0, n)
	for _, s := range secrets {
		kind, name := byte('e'), s.Env
		if s.File != "" {
			kind, name = 'f', s.File
		}
		b = append(b, kind)
		b = binary.BigEndian.AppendUint16(b, uint16(len(name)))
		b = append(b, name...)
		b = binary.BigEndian.AppendUint32(b, uint32(len(s.Value)))
		b = append(b, s.Value...)
	}
	return b, nil
}

// DecodeSecrets reads frames. The values alias b: wiping b wipes them.
func DecodeSecrets(b []byte) ([]Secret, error) {
	var out []Secret
	for len(b) > 0 {
		if len(b) < 3 {
			return nil, errdefs.Invalid("truncated secret frame")
		}
		kind, n := b[0], int(binary.BigEndian.Uint16(b[1:3]))
		b = b[3:]
		if len(b) < n+4 {
			return nil, errdefs.Invalid("truncated secret frame")
		}
		name := string(b[:n])
		vn := int(binary.BigEndian.Uint32(b[n : n+4]))
		b = b[n+4:]
		if vn > MaxSecretBytes || len(b) < vn {
			return nil, errdefs.Invalid("secret frame value of %d bytes is truncated or over the %d limit", vn, MaxSecretBytes)
		}
		s := Secret{Value: b[:vn:vn]}
		switch kind {
		case 'e':
			s.Env = name
		case 'f':
			s.File = name
		default:
			return nil, errdefs.Invalid("unknown secret frame kind %q", kind)
		}
		if err := s.check(); err != nil {
			return nil, err
		}
		if out = append(out, s); len(out) > MaxSecrets {
			return nil, errdefs.TooLarge("over %d secrets", MaxSecrets)
		}
		b = b[vn:]
	}
	return out, nil
}

// check validates where a secret goes: an environment variable name, or a
// file directly in SecretDir.
func (s Secret) check() error {
	if (s.Env == "") == (s.File == "") {
		return errdefs.Invalid("a secret goes to exactly one of an environment variable or a file")
	}
	if len(s.Value) > MaxSecretBytes {
		return errdefs.TooLarge("secret of %d bytes, over the %d limit", len(s.Value), MaxSecretBytes)
	}
	if s.Env != "" {
		if strings.ContainsAny(s.Env, "=\x00") || len(s.Env) > 255 {
			return errdefs.Invalid("invalid secret environment variable name %q", s.Env)
		}
		return nil
	}
	if path.Dir(s.File) != SecretDir || path.Clean(s.File) != s.File || strings.ContainsRune(s.File, 0) {
		return errdefs.Invalid("secret file %q is not directly in %s", s.File, SecretDir)
	}
	return nil
}
