package e2b

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
	"github.com/den-dev/den/internal/inproc"
)

// Who may use a sandbox's envd plane and its ports. Every E2B sandbox has
// two secrets of its own, which dend derives from its key and the
// sandbox's id whenever it needs them, and never stores:
//
//   - the envd access token (envdAccessToken in create and connect): the
//     sandbox's files and processes, as X-Access-Token, and the key E2B's
//     SDK signs upload and download URLs with;
//   - the traffic access token (trafficAccessToken): the servers inside
//     it, as the header e2b-traffic-access-token, and nothing else, so it
//     can go to a browser or a webhook that must not run commands.
//
// Either acts for the sandbox's owner on that one sandbox, as long as the
// sandbox lives (as E2B's do: they survive pause and resume, and die with
// the sandbox); den audits its calls under the token's name. A den token
// works too, in X-Access-Token or as a bearer token, with its own rights:
// an owner token reaches only its owner's sandboxes.
//
// Only create and connect hand the tokens out, and both change the
// sandbox, so a read-only den token never obtains them.

// Prefixes of the two tokens, which set them apart from den tokens.
const (
	envdTokenPrefix    = "e2ba_"
	trafficTokenPrefix = "e2bt_"
)

// headerTrafficToken carries the traffic access token, as E2B's proxy
// expects it.
const headerTrafficToken = "E2b-Traffic-Access-Token"

// sandboxToken derives a token of the kind prefix names for sandbox id.
func (d *Door) sandboxToken(prefix, id string) string {
	m := hmac.New(sha256.New, d.key)
	m.Write([]byte("den e2b sandbox token v1\x00" + prefix + "\x00" + id))
	return prefix + hex.EncodeToString(m.Sum(nil))
}

// isToken reports, in constant time, whether tok is sandbox id's token of
// the kind prefix names.
func (d *Door) isToken(prefix, id, tok string) bool {
	return len(d.key) > 0 && subtle.ConstantTimeCompare([]byte(tok), []byte(d.sandboxToken(prefix, id))) == 1
}

var errBadAccessToken = &client.Error{API: &api.Error{Code: api.CodeUnauthorized,
	Message: "invalid access token: it is not this sandbox's",
	Hint:    "send the envdAccessToken create or connect answered for this sandbox, or a den token that reaches it"}}

// errNotRunning is a sandbox unknown, another owner's or not running,
// which E2B's proxy answers 502.
var errNotRunning = errors.New("sandbox not running")

// envdCaller finds who an envd request acts as, and the running sandbox
// id it is for: its signature (a signed /files URL), the sandbox's envd
// token, or a den token.
func (d *Door) envdCaller(r *http.Request, id string) (*client.Client, *api.Sandbox, error) {
	tok := r.Header.Get(headerAccessToken)
	switch {
	case isSigned(r):
		if err := d.checkSignature(r, id, time.Now()); err != nil {
			return nil, nil, err
		}
		return d.asSandbox(r.Context(), id, "e2b signed URL of sandbox "+id)
	case strings.HasPrefix(tok, trafficTokenPrefix):
		return nil, nil, errBadAccessToken // it reaches servers, not envd
	case strings.HasPrefix(tok, envdTokenPrefix):
		if !d.isToken(envdTokenPrefix, id, tok) {
			return nil, nil, errBadAccessToken
		}
		return d.asSandbox(r.Context(), id, "e2b access token of sandbox "+id)
	}
	c, _, err := d.clientFor(r, headerAccessToken)
	if err != nil {
		return nil, nil, err
	}
	sb, err := c.LookupSandbox(r.Context(), id)
	sb, err = d.ready(r.Context(), c, sb, err)
	return c, sb, err
}

// running passes a running sandbox; one not found, not the caller's or
// not running is errNotRunning.
func running(sb *api.Sandbox, err error) error {
	switch {
	case err == nil && sb.State == api.StateRunning && sb.Pending == "":
		return nil
	case err == nil || client.IsNotFound(err) || client.IsForbidden(err):
		return errNotRunning
	}
	return err
}

// asSandbox returns a client acting for the owner of sandbox id, under
// name in the audit log; root's for a sandbox an admin made, which has no
// owner. The sandbox must be running, or wake on traffic (ready).
func (d *Door) asSandbox(ctx context.Context, id, name string) (*client.Client, *api.Sandbox, error) {
	root, err := inproc.Client(d.root, "", "", userAgent)
	if err != nil {
		return nil, nil, err
	}
	sb, err := root.LookupSandbox(ctx, id)
	if err != nil {
		return nil, nil, running(sb, err)
	}
	if sb.ID != id {
		return nil, nil, errNotRunning // a name, not the id the token is for
	}
	c := root
	if sb.Owner != "" {
		if c, err = inproc.Client(actAs{rt: d.root, owner: sb.Owner, name: name}, "", "", userAgent); err != nil {
			return nil, nil, err
		}
	}
	if sb, err = d.ready(ctx, c, sb, nil); err != nil {
		return nil, nil, err
	}
	return c, sb, nil
}

// actAs carries requests to the API's root end acting for one owner.
type actAs struct {
	rt          http.RoundTripper
	owner, name string
}

func (a actAs) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(inproc.ActAsOwnerHeader, a.owner)
	r.Header.Set(inproc.ActAsNameHeader, a.name)
	return a.rt.RoundTrip(r)
}

// Signed URLs: uploadUrl() and downloadUrl() of E2B's SDK add
//
//	signature=v1_BASE64(SHA-256("PATH:OPERATION:USER:TOKEN[:EXPIRATION]"))
//	signature_expiration=UNIX SECONDS (optional)
//
// to /files?path=PATH[&username=USER], with OPERATION read (GET) or write
// (POST), TOKEN the envd access token and base64's padding dropped.

const (
	paramSignature  = "signature"
	paramExpiration = "signature_expiration"
)

// isSigned reports whether r is a /files request with a signature.
func isSigned(r *http.Request) bool {
	if r.URL.Path != "/files" {
		return false
	}
	q := r.URL.Query()
	return q.Has(paramSignature) || q.Has(paramExpiration)
}

// signature is what the SDK signs r's file operation with under token.
func signature(r *http.Request, token string) string {
	q := r.URL.Query()
	op := "read"
	if r.Method == http.MethodPost {
		op = "write"
	}
	raw := q.Get("path") + ":" + op + ":" + q.Get("username") + ":" + token
	if exp := q.Get(paramExpiration); exp != "" {
		raw += ":" + exp
	}
	sum := sha256.Sum256([]byte(raw))
	return "v1_" + strings.TrimRight(base64.StdEncoding.EncodeToString(sum[:]), "=")
}

func badSignature(format string, args ...any) error {
	e := invalidHint("make a new one with uploadUrl() or downloadUrl()", format, args...).(*client.Error)
	e.API.Code = api.CodeUnauthorized
	return e
}

// errSignatureExpired is what envd answers a signed URL past its
// expiration.
const errSignatureExpired = "signature is already expired"

// checkSignature checks r's signature against sandbox id's envd token,
// then its expiration: a signed URL does one thing, to one path, as one
// user, until it expires.
func (d *Door) checkSignature(r *http.Request, id string, now time.Time) error {
	q := r.URL.Query()
	sig := q.Get(paramSignature)
	if sig == "" {
		return badSignature("malformed signed URL: %s without %s", paramExpiration, paramSignature)
	}
	if !strings.HasPrefix(sig, "v1_") {
		return badSignature("unsupported signature %q: den checks signatures v1_", strings.SplitN(sig, "_", 2)[0])
	}
	if len(d.key) == 0 || subtle.ConstantTimeCompare([]byte(sig), []byte(signature(r, d.sandboxToken(envdTokenPrefix, id)))) != 1 {
		return badSignature("invalid signature: it does not match this file, operation and user")
	}
	if exp := q.Get(paramExpiration); exp != "" {
		n, err := strconv.ParseInt(exp, 10, 64)
		if err != nil {
			return badSignature("malformed signed URL: %s=%q is not a Unix time", paramExpiration, exp)
		}
		if at := time.Unix(n, 0); !now.Before(at) {
			// envd's words, hint and all: E2B's SDK tests compare the
			// body, {"code":401,"message":"signature is already expired"}.
			return &client.Error{API: &api.Error{Code: api.CodeUnauthorized, Message: errSignatureExpired}}
		}
	}
	return nil
}

// signedSandbox finds the sandbox a signed /files request is for when
// nothing names it (the SDK drops E2B_SANDBOX_URL's headers from signed
// URLs): the running sandbox whose token signed it. "" when none did.
func (d *Door) signedSandbox(r *http.Request) (string, error) {
	root, err := inproc.Client(d.root, "", "", userAgent)
	if err != nil {
		return "", err
	}
	sbs, err := root.ListSandboxes(r.Context())
	if err != nil {
		return "", err
	}
	sig := []byte(r.URL.Query().Get(paramSignature))
	for i := range sbs {
		if sbs[i].State != api.StateRunning {
			continue
		}
		if subtle.ConstantTimeCompare(sig, []byte(signature(r, d.sandboxToken(envdTokenPrefix, sbs[i].ID)))) == 1 {
			return sbs[i].ID, nil
		}
	}
	return "", nil
}
