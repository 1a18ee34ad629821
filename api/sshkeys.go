package api

import "time"

// AddSSHKeyRequest is the body of POST /v1/ssh-keys.
type AddSSHKeyRequest struct {
	Name string `json:"name"`
	// PublicKey is one key in authorized_keys form, as ssh-keygen writes
	// FILE.pub: "ssh-ed25519 AAAA... comment".
	PublicKey string `json:"public_key"`
}

// SSHKey is a public key registered for the SSH gateway. It acts with the
// rights of the token that registered it, until that token is revoked.
type SSHKey struct {
	Name        string    `json:"name"`
	Fingerprint string    `json:"fingerprint"` // SHA256:..., as ssh-keygen -l prints it
	Type        string    `json:"type"`        // e.g. ssh-ed25519
	PublicKey   string    `json:"public_key"`  // TYPE BASE64
	Comment     string    `json:"comment,omitempty"`
	TokenID     string    `json:"token_id"`
	CreatedAt   time.Time `json:"created_at"`
}

// SSHKeyList is the body of GET /v1/ssh-keys.
type SSHKeyList struct {
	Keys []SSHKey `json:"keys"`
}
