package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/den-dev/den/api"
)

// CreateToken makes an API token. The answer's Token field is the token
// itself, shown this once: dend keeps only a digest of it. Admin only.
func (c *Client) CreateToken(ctx context.Context, req api.CreateTokenRequest) (*api.Token, error) {
	var t api.Token
	if err := c.do(ctx, http.MethodPost, "/tokens", nil, req, &t); err != nil {
		return nil, err
	}
	return &t, nil
}

// ListTokens returns every API token, revoked and expired ones too, oldest
// first, without the tokens themselves. Admin scopes only.
func (c *Client) ListTokens(ctx context.Context) ([]api.Token, error) {
	var l api.TokenList
	if err := c.do(ctx, http.MethodGet, "/tokens", nil, nil, &l); err != nil {
		return nil, err
	}
	return l.Tokens, nil
}

// RevokeToken ends a token, named by id or name, at once. Revoking a
// revoked token changes nothing. Admin only.
func (c *Client) RevokeToken(ctx context.Context, ref string) error {
	return c.do(ctx, http.MethodDelete, "/tokens/"+url.PathEscape(ref), nil, nil, nil)
}

// AuditQuery selects audit entries; zero fields select everything.
type AuditQuery struct {
	Since   time.Time // entries at or after it
	Sandbox string    // about this sandbox (name or id)
	Token   string    // by this token (name or id)
	Limit   int       // the newest this many; 0 means dend's default (100)
}

// Audit reads the audit log: the calls that changed, or tried to change,
// something, oldest first. Admin scopes only.
func (c *Client) Audit(ctx context.Context, q AuditQuery) ([]api.AuditEntry, error) {
	v := url.Values{}
	if !q.Since.IsZero() {
		v.Set("since", q.Since.UTC().Format(time.RFC3339Nano))
	}
	if q.Sandbox != "" {
		v.Set("sandbox", q.Sandbox)
	}
	if q.Token != "" {
		v.Set("token", q.Token)
	}
	if q.Limit != 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	var l api.AuditList
	if err := c.do(ctx, http.MethodGet, "/audit", v, nil, &l); err != nil {
		return nil, err
	}
	return l.Entries, nil
}

// SetSecret stores value under name (like an environment variable's:
// DB_PASSWORD), replacing any value it had. Values are at most
// api.MaxSecretBytes and are never sent back. Admin only.
func (c *Client) SetSecret(ctx context.Context, name string, value []byte) (*api.Secret, error) {
	if len(value) > api.MaxSecretBytes {
		return nil, fromAPI(&api.Error{Code: api.CodeTooLarge,
			Message: fmt.Sprintf("secret value is %d bytes, over the %d byte limit", len(value), api.MaxSecretBytes)})
	}
	resp, err := c.send(ctx, request{method: http.MethodPut, path: "/secrets/" + url.PathEscape(name),
		body: bytes.NewReader(value), contentType: "application/octet-stream"})
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var s api.Secret
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		return nil, fmt.Errorf("decoding the response to PUT /secrets/%s: %w", name, err)
	}
	return &s, nil
}

// ListSecrets returns the secrets' names and times, never their values.
// Admin scopes only.
func (c *Client) ListSecrets(ctx context.Context) ([]api.Secret, error) {
	var l api.SecretList
	if err := c.do(ctx, http.MethodGet, "/secrets", nil, nil, &l); err != nil {
		return nil, err
	}
	return l.Secrets, nil
}

// RemoveSecret deletes a secret. Admin only.
func (c *Client) RemoveSecret(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodDelete, "/secrets/"+url.PathEscape(name), nil, nil, nil)
}

// AddSSHKey registers a public key (authorized_keys form, as in FILE.pub)
// for the SSH gateway, under the caller's token: it acts with that
// token's rights until the token is revoked.
func (c *Client) AddSSHKey(ctx context.Context, name, publicKey string) (*api.SSHKey, error) {
	var k api.SSHKey
	if err := c.do(ctx, http.MethodPost, "/ssh-keys", nil, api.AddSSHKeyRequest{Name: name, PublicKey: publicKey}, &k); err != nil {
		return nil, err
	}
	return &k, nil
}

// ListSSHKeys returns the caller's token's SSH keys (an admin's: every
// key), oldest first.
func (c *Client) ListSSHKeys(ctx context.Context) ([]api.SSHKey, error) {
	var l api.SSHKeyList
	if err := c.do(ctx, http.MethodGet, "/ssh-keys", nil, nil, &l); err != nil {
		return nil, err
	}
	return l.Keys, nil
}

// RemoveSSHKey removes an SSH key, named by its name or fingerprint.
func (c *Client) RemoveSSHKey(ctx context.Context, ref string) error {
	return c.do(ctx, http.MethodDelete, "/ssh-keys/"+url.PathEscape(ref), nil, nil, nil)
}
