package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/internal/cluster"
	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/httpapi/httpx"
	"github.com/den-dev/den/internal/httpapi/portproxy"
	"github.com/den-dev/den/internal/image"
	"github.com/den-dev/den/internal/sandbox"
)

// Cluster is the fleet a dend is a node of; *cluster.Forwarder
// implements it.
type Cluster interface {
	// Self is this node's name.
	Self() string
	// Forwarded reports whether another node sent r, with the fleet's key.
	Forwarded(r *http.Request) bool
	// Lost reports whether node was declared lost; Taking, whether this
	// node takes new sandboxes (it is active).
	Lost(ctx context.Context, node string) bool
	Taking(ctx context.Context) bool
	// Place names the node a new sandbox goes to: "" for this one.
	Place(ctx context.Context, want cluster.Want) (string, error)
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
	info := httpx.InfoOf(r)
	if s.cluster == nil {
		return false, nil
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, s.maxJSONBytes+1))
	if err != nil {
		return true, fmt.Errorf("reading the request: %w", err)
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	var req api.CreateSandboxRequest
	if json.Unmarshal(body, &req) != nil {
		return false, nil // the handler says what is wrong with it
	}
	if req.Node == s.cluster.Self() {
		if !s.cluster.Taking(r.Context()) {
			return true, errdefs.WithHint(errdefs.Conflict("node %s is draining: it takes no new sandboxes", req.Node),
				"leave --node out to place it on another node, or `den node activate "+req.Node+"`")
		}
		return false, nil
	}
	if info.FromNode {
		return false, nil // placed by the node that sent it
	}
	node := req.Node
	if node == "" {
		want, ok := s.wantFor(r.Context(), req)
		if !ok {
			return false, nil // the handler says what is wrong with it
		}
		if node, err = s.cluster.Place(r.Context(), want); err != nil || node == "" {
			return err != nil, err
		}
	}
	if err := s.cluster.Forward(w, r, node, "", IsLocal(r)); err != nil {
		return true, err
	}
	info.SentOn = true
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
// node forwarded here is answered here, never sent on (the service
// refuses it if the sandbox moved meanwhile), unless answering it would
// wake a sandbox this node has no room for: then the sandbox goes to a
// node with room, and the request after it.
func (s *server) forward(w http.ResponseWriter, r *http.Request, info *httpx.Info) (bool, error) {
	if s.cluster == nil || (info.FromNode && !wakes(r, info.Route)) || info.Route == sshRelayRoute {
		return false, nil // a node sent it here: answered here, unless it wakes (below)
	}
	var err error
	sb := info.Found
	if sb == nil {
		if sb, err = s.sandboxes.Get(r.Context(), r.PathValue("name")); err != nil {
			return false, nil // the handler answers as it would anyway
		}
	}
	switch {
	case sb.Node == s.cluster.Self():
		if sb.State != sandbox.StateHibernated || !wakes(r, info.Route) {
			return false, nil // the handler answers as it would anyway
		}
		// About to wake here: on another node, if this one has no room.
		// The request follows it there, even one a node sent here.
		if s.fleet == nil {
			return false, nil // nowhere to go: it wakes here
		}
		to, err := s.fleet.Rehome(r.Context(), sb.ID)
		if err != nil || to == "" {
			return false, err
		}
		moved := *sb
		moved.Node = to
		sb = &moved
	case info.FromNode:
		return false, nil
	}
	if info.Route == recoverRoute && s.cluster.Lost(r.Context(), sb.Node) {
		return false, nil // any node takes over a lost node's sandbox
	}
	if path, rawPath, ok := portproxy.ByHost(r.Context()); ok {
		// Sent to PORT-NAME.DOMAIN: the node routes it by its host again.
		u := *r.URL
		u.Path, u.RawPath = path, rawPath
		r = r.Clone(r.Context())
		r.URL = &u
	}
	local := IsLocal(r) || (info.FromNode && r.Header.Get(cluster.HeaderLocal) != "")
	err = s.cluster.Forward(w, r, sb.Node, sb.Name, local)
	if err == nil {
		info.SentOn = true
		return true, nil
	}
	if r.Method == http.MethodGet && slices.Contains(recordRoutes, info.Route) && errors.Is(err, errdefs.ErrUnavailable) {
		return false, nil
	}
	if errors.Is(err, errdefs.ErrUnavailable) && s.fleet != nil && s.cluster.Lost(r.Context(), sb.Node) {
		// Whether another node can bring it back depends on what of it
		// was uploaded, which the fleet knows.
		err = errdefs.WithHint(err, s.fleet.LostNodeHint(r.Context(), sb))
	}
	return true, err
}

// wakes reports whether a request on route wakes a sleeping sandbox: it
// runs something in it, reads or writes its files, or reaches a port.
func wakes(r *http.Request, route string) bool {
	if _, _, ok := portproxy.ByHost(r.Context()); ok {
		return true
	}
	switch route {
	case "/v1/sandboxes/{name}/resume", "/v1/sandboxes/{name}/exec", "/v1/sandboxes/{name}/exec/ws",
		"/v1/sandboxes/{name}/processes", "/v1/sandboxes/{name}/files":
		return true
	}
	return strings.HasPrefix(route, "/v1/sandboxes/{name}/files/")
}

// wantFor is what a create asks of the node it goes to, or false when
// the request names what does not exist (for the handler to say so).
// Its image can be had on any node when it is a built-in one, which each
// node builds, or one uploaded to the blob store. A create from a
// checkpoint goes preferably to the node of the checkpoint's sandbox,
// which has it locally, and only there unless it is uploaded.
func (s *server) wantFor(ctx context.Context, req api.CreateSandboxRequest) (cluster.Want, bool) {
	if req.From != "" {
		ck, err := s.sandboxes.FindCheckpoint(ctx, req.From)
		if err != nil {
			return cluster.Want{}, false
		}
		sb, err := s.sandboxes.Get(ctx, ck.SandboxID)
		if err != nil {
			return cluster.Want{}, false
		}
		return cluster.Want{Home: sb.Node, Portable: ck.Location == sandbox.LocationUploaded, MemoryBytes: ck.Manifest.Spec.MemoryBytes}, true
	}
	mem, err := sandbox.ParseMemory(req.Memory)
	if err != nil {
		return cluster.Want{}, false
	}
	if mem == 0 {
		mem = sandbox.DefaultMemory
	}
	name := req.Image
	if name == "" {
		name = sandbox.DefaultImage
	}
	portable := slices.Contains(image.BuiltinNames(), name)
	if !portable {
		im, err := s.images.Get(ctx, name)
		portable = err == nil && im.Location == sandbox.LocationUploaded
	}
	return cluster.Want{Portable: portable, MemoryBytes: mem}, true
}
