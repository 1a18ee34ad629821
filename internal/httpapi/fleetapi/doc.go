// Package fleetapi serves the REST routes of den's fleet: the nodes
// (GET /v1/nodes, draining, activating and removing one), moving a
// sandbox to another node and the routes only the nodes call when one
// hands a sandbox over (adopt, handover), and collecting the blob store
// (POST /v1/admin/blobs/gc).
//
// internal/httpapi registers its handlers in the one route table, after
// the access layers let a request in. It decodes, calls the fleet's
// services and encodes; it never moves a sandbox itself, keeps no state,
// and does nothing on a dend that is not part of a fleet but answer that
// it is not.
package fleetapi

import (
	"net/http"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/internal/sandbox"
)

// Forwarder sends a request to another node of the fleet;
// *cluster.Forwarder implements it.
type Forwarder interface {
	// Self is this node's name.
	Self() string
	// Forward sends r to node, which runs sandbox, and streams the answer
	// back; when nothing was answered it returns why.
	Forward(w http.ResponseWriter, r *http.Request, node, sandbox string, local bool) error
}

// Config is what the fleet's routes need; each service may be nil, and
// its routes then answer that dend has none.
type Config struct {
	Nodes Nodes
	Fleet Fleet
	Blobs Blobs
	// Cluster is the fleet this dend is a node of; nil: none.
	Cluster Forwarder
	// ToSandbox is the API's answer for a sandbox.
	ToSandbox func(*sandbox.Sandbox) api.Sandbox
	// MaxJSONBytes bounds JSON request bodies.
	MaxJSONBytes int64
}

// Handlers serves the fleet's routes.
type Handlers struct {
	nodes        Nodes
	fleet        Fleet
	blobs        Blobs
	cluster      Forwarder
	toSandbox    func(*sandbox.Sandbox) api.Sandbox
	maxJSONBytes int64
}

// New returns the handlers of cfg.
func New(cfg Config) *Handlers {
	return &Handlers{nodes: cfg.Nodes, fleet: cfg.Fleet, blobs: cfg.Blobs, cluster: cfg.Cluster,
		toSandbox: cfg.ToSandbox, maxJSONBytes: cfg.MaxJSONBytes}
}
