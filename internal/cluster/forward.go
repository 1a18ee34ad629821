package cluster

import (
	"context"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"

	"github.com/den-dev/den/internal/errdefs"
)

// Headers of a forwarded request.
const (
	// HeaderKey carries the fleet's key (hex): the request comes from a
	// node, which checked the caller, and must not be forwarded again.
	HeaderKey = "Den-Cluster-Key"
	// HeaderFrom names the node that forwarded it.
	HeaderFrom = "Den-Forwarded-From"
	// HeaderLocal says the caller came through the forwarding node's unix
	// socket (root), and so has no token to send along.
	HeaderLocal = "Den-Forwarded-Local"
	// HeaderStreamCRC is the trailer of a checkpoint part a node sends
	// ahead to the node it hands a sandbox over to: the CRC-32C of its
	// bytes (hex), so that the receiver keeps only a stream that came
	// whole.
	HeaderStreamCRC = "Den-Stream-Crc32c"
	// HeaderSSHKey carries, on an SSH login one node relays to the node
	// of its sandbox, the public key the client proved it holds (SSH wire
	// format, base64); HeaderSSHRemote, the client's address.
	HeaderSSHKey    = "Den-Ssh-Key"
	HeaderSSHRemote = "Den-Ssh-Remote"
	// SSHProto is what that request switches its connection to: SSH.
	SSHProto = "den-ssh"
)

// NodeLookup finds nodes' records.
type NodeLookup interface {
	Node(ctx context.Context, name string) (Node, error)
	Nodes(ctx context.Context) ([]Node, error)
}

// Forwarder sends a request for a sandbox another node runs to that
// node, and streams its answer back: exec and log streams, WebSockets
// (shells), file copies and exposed ports alike.
type Forwarder struct {
	self  string
	nodes NodeLookup
	key   string // hex
	log   *slog.Logger
	proxy *httputil.ReverseProxy
}

// forwarding is what one forwarded request carries through the proxy:
// its target, and the error that kept it from reaching it.
type forwarding struct {
	node Node
	err  error
}

type forwardingKey struct{}

// NewForwarder returns the forwarder of node self.
func NewForwarder(self string, nodes NodeLookup, key []byte, log *slog.Logger) *Forwarder {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	f := &Forwarder{self: self, nodes: nodes, key: hex.EncodeToString(key), log: log}
	f.proxy = &httputil.ReverseProxy{
		Rewrite:       f.rewrite,
		FlushInterval: -1, // streams flow as they come
		Transport: &http.Transport{
			Proxy:               nil, // peers are reached directly, never through a proxy from the environment
			DialContext:         (&netDialer).DialContext,
			MaxIdleConnsPerHost: 16,
			IdleConnTimeout:     90 * time.Second,
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			fw := r.Context().Value(forwardingKey{}).(*forwarding)
			if r.Context().Err() != nil {
				return // the caller left
			}
			f.log.Warn("forwarding a request to its node", "node", fw.node.Name, "peer", fw.node.PeerURL, "path", r.URL.Path, "err", err)
			fw.err = errdefs.WithHint(errdefs.Unavailable("node %s, which runs this sandbox, did not answer: %v", fw.node.Name, err),
				fmt.Sprintf("try again shortly; `den node ls` shows whether the node is alive. If its dend is down, its sandboxes stop when its lease runs out and other nodes declare it lost %s later, %s",
					FenceGrace, untilLost(fw.node)))
		},
	}
	return f
}

// Self is this node's name.
func (f *Forwarder) Self() string { return f.self }

// Forwarded reports whether r came from another node of the fleet: it
// carries the fleet's key.
func (f *Forwarder) Forwarded(r *http.Request) bool {
	got := r.Header.Get(HeaderKey)
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(f.key)) == 1
}

// Forward sends r to node, which runs the sandbox named sandbox, and
// copies its answer to w. local says the caller came through this node's
// unix socket. When nothing was answered (the node is lost, has not
// renewed its lease, or could not be reached) it returns why, for the
// caller to answer.
func (f *Forwarder) Forward(w http.ResponseWriter, r *http.Request, node, sandbox string, local bool) error {
	n, err := f.nodes.Node(r.Context(), node)
	if err != nil {
		return fmt.Errorf("finding node %s, which sandbox %q is on: %w", node, sandbox, err)
	}
	if err := reachable(n, sandbox); err != nil {
		return err
	}
	fw := &forwarding{node: n}
	r = r.WithContext(context.WithValue(r.Context(), forwardingKey{}, fw))
	r.Header.Del(HeaderLocal)
	if local {
		r.Header.Set(HeaderLocal, "1")
	}
	f.proxy.ServeHTTP(w, r)
	return fw.err
}

// reachable says why requests for sandbox cannot go to node n, if they
// cannot.
func reachable(n Node, sandbox string) error {
	subject := "node " + n.Name + ", which"
	if sandbox != "" {
		subject = fmt.Sprintf("sandbox %q is on node %s, which", sandbox, n.Name)
	}
	switch {
	case n.State == StateLost:
		err := errdefs.Unavailable("%s is lost: %s", subject, n.Reason)
		if sandbox == "" {
			return err
		}
		return errdefs.WithHint(err, fmt.Sprintf("`den recover %s --rollback` brings it back on another node from its last upload", sandbox))
	case time.Now().After(n.LeaseExpires):
		err := errdefs.Unavailable("%s has not renewed its lease since %s", subject, n.HeartbeatAt.Format(time.RFC3339))
		return errdefs.WithHint(err, fmt.Sprintf("its dend may be down or cut off: its sandboxes stopped when its lease ran out, and other nodes declare it lost %s later, %s; %s",
			FenceGrace, untilLost(n), recoverAfter(sandbox)))
	case n.PeerURL == "":
		return errdefs.WithHint(errdefs.Unavailable("%s has no TCP listener for other nodes to forward to", subject),
			fmt.Sprintf("ask node %s itself, or restart its dend with --listen (and --peer-url)", n.Name))
	}
	return nil
}

func (f *Forwarder) rewrite(pr *httputil.ProxyRequest) {
	n := pr.In.Context().Value(forwardingKey{}).(*forwarding).node
	target, err := url.Parse(n.PeerURL)
	if err != nil {
		target = &url.URL{Scheme: "http", Host: "invalid.invalid"}
	}
	pr.SetURL(target)
	pr.Out.URL.Path, pr.Out.URL.RawPath = pr.In.URL.Path, pr.In.URL.RawPath
	pr.Out.Host = pr.In.Host // exposed ports are chosen by host name
	pr.SetXForwarded()
	pr.Out.Header.Set(HeaderKey, f.key)
	pr.Out.Header.Set(HeaderFrom, f.self)
	// Only a node's own gateway vouches for an SSH key (Dial); a caller's
	// request forwarded on never does.
	pr.Out.Header.Del(HeaderSSHKey)
}

// untilLost says when other nodes may declare n lost, as this host's
// clock has it.
func untilLost(n Node) string {
	at := n.LeaseExpires.Add(FenceGrace)
	if wait := time.Until(at); wait > 0 {
		return fmt.Sprintf("at %s (in about %s)", at.UTC().Format(time.RFC3339), wait.Round(time.Second))
	}
	return "at the next heartbeat of any node"
}

// recoverAfter says what brings sandbox back once its node is lost.
func recoverAfter(sandbox string) string {
	if sandbox == "" {
		return "then `den recover NAME --rollback` brings each back on another node from its last upload"
	}
	return fmt.Sprintf("then `den recover %s --rollback` brings it back on another node from its last upload", sandbox)
}

var netDialer = net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}

// Lost reports whether node was declared lost.
func (f *Forwarder) Lost(ctx context.Context, node string) bool {
	n, err := f.nodes.Node(ctx, node)
	return err == nil && n.State == StateLost
}

// Taking reports whether this node takes new sandboxes: it is active.
func (f *Forwarder) Taking(ctx context.Context) bool {
	n, err := f.nodes.Node(ctx, f.self)
	return err == nil && n.State == StateActive
}
