package httpapi

import (
	"context"
	"errors"
	"net/http"
	"slices"

	"github.com/den-dev/den/internal/errdefs"
)

// Cluster is the fleet a dend is a node of; *cluster.Forwarder
// implements it.
type Cluster interface {
	// Self is this node's name.
	Self() string
	// Forwarded reports whether another node sent r, with the fleet's key.
	Forwarded(r *http.Request) bool
	// Lost reports whether node was declared lost.
	Lost(ctx context.Context, node string) bool
	// Place names the node a new sandbox goes to: "" for this one.
	Place(ctx context.Context) (string, error)
	// Forward sends r to node, which runs sandbox, and streams the answer
	// back; when nothing was answered it returns why.
	Forward(w http.ResponseWriter, r *http.Request, node, sandbox string, local bool) error
}

// recordRoutes answer from the records alone: when the sandbox's node
// cannot be reached they are answered here, so a sandbox on a lost node
// can still be looked at.
var recordRoutes = []string{
	"/v1/sandboxes/{name}",
	"/v1/sandboxes/{name}/events",
	"/v1/sandboxes/{name}/checkpoints",
	"/v1/sandboxes/{name}/checkpoints/{ckpt}",
}

// placeCreate sends a create to the node placement chooses, when that is
// another node, reporting whether it did.
func (s *server) placeCreate(w http.ResponseWriter, r *http.Request) (bool, error) {
	info := infoOf(r)
	if s.cluster == nil || info.fromNode {
		return false, nil
	}
	node, err := s.cluster.Place(r.Context())
	if err != nil || node == "" {
		return err != nil, err
	}
	if err := s.cluster.Forward(w, r, node, "", IsLocal(r)); err != nil {
		return true, err
	}
	info.sentOn = true
	return true, nil
}

// recoverRoute is where a sandbox is recovered: on a lost node's
// sandbox, by the node asked.
const recoverRoute = "/v1/sandboxes/{name}/recover"

// fromNode reports whether another node of the fleet forwarded r.
func (s *server) fromNode(r *http.Request) bool {
	return s.cluster != nil && s.cluster.Forwarded(r)
}

// forward sends a request for a sandbox another node runs to that node,
// reporting whether it did (and the answer is given). A request another
// node forwarded here is answered here, never sent on: the service
// refuses it if the sandbox moved meanwhile.
func (s *server) forward(w http.ResponseWriter, r *http.Request, info *requestInfo) (bool, error) {
	if s.cluster == nil || info.fromNode {
		return false, nil
	}
	sb, err := s.sandboxes.Get(r.Context(), r.PathValue("name"))
	if err != nil || sb.Node == s.cluster.Self() {
		return false, nil // the handler answers as it would anyway
	}
	if info.route == recoverRoute && s.cluster.Lost(r.Context(), sb.Node) {
		return false, nil // any node takes over a lost node's sandbox
	}
	if hr, ok := r.Context().Value(hostRouteKey{}).(*hostRoute); ok {
		// Sent to PORT-NAME.DOMAIN: the node routes it by its host again.
		u := *r.URL
		u.Path, u.RawPath = hr.path, hr.rawPath
		r = r.Clone(r.Context())
		r.URL = &u
	}
	err = s.cluster.Forward(w, r, sb.Node, sb.Name, IsLocal(r))
	if err == nil {
		info.sentOn = true
		return true, nil
	}
	if r.Method == http.MethodGet && slices.Contains(recordRoutes, info.route) && errors.Is(err, errdefs.ErrUnavailable) {
		return false, nil
	}
	return true, err
}
