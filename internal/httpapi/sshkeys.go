package httpapi

import (
	"context"
	"net/http"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/internal/auth"
	"github.com/den-dev/den/internal/httpapi/httpx"
)

// SSHKeyService keeps the public keys of the SSH gateway. *auth.Service
// implements it. Keys belong to the caller's token; admins see and
// remove every key.
type SSHKeyService interface {
	AddKey(ctx context.Context, p auth.Principal, name string, text []byte) (*auth.SSHKey, error)
	ListKeys(ctx context.Context, p auth.Principal) ([]*auth.SSHKey, error)
	RemoveKey(ctx context.Context, p auth.Principal, ref string) (*auth.SSHKey, error)
}

func toSSHKey(k *auth.SSHKey) api.SSHKey {
	return api.SSHKey{Name: k.Name, Fingerprint: k.Fingerprint, Type: k.Type, PublicKey: k.PublicKey,
		Comment: k.Comment, TokenID: k.TokenID, CreatedAt: k.CreatedAt}
}

func (s *server) addSSHKey(w http.ResponseWriter, r *http.Request) error {
	if s.sshKeys == nil {
		return httpx.NotEnabled("SSH keys")
	}
	var req api.AddSSHKeyRequest
	if err := httpx.DecodeJSON(w, r, &req, s.maxJSONBytes); err != nil {
		return err
	}
	k, err := s.sshKeys.AddKey(r.Context(), httpx.PrincipalOf(r), req.Name, []byte(req.PublicKey))
	if err != nil {
		return err
	}
	return httpx.WriteJSON(w, http.StatusCreated, toSSHKey(k))
}

func (s *server) listSSHKeys(w http.ResponseWriter, r *http.Request) error {
	if s.sshKeys == nil {
		return httpx.NotEnabled("SSH keys")
	}
	ks, err := s.sshKeys.ListKeys(r.Context(), httpx.PrincipalOf(r))
	if err != nil {
		return err
	}
	return httpx.WriteJSON(w, http.StatusOK, api.SSHKeyList{Keys: mapSlice(ks, toSSHKey)})
}

func (s *server) removeSSHKey(w http.ResponseWriter, r *http.Request) error {
	if s.sshKeys == nil {
		return httpx.NotEnabled("SSH keys")
	}
	if _, err := s.sshKeys.RemoveKey(r.Context(), httpx.PrincipalOf(r), r.PathValue("key")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
