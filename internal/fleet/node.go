package fleet

import (
	"log/slog"

	"github.com/den-dev/den/internal/sandbox"
)

// Config is what a Node is made of.
type Config struct {
	// Service is this node's sandbox core, whose verbs the Node uses.
	Service *sandbox.Service
	// Store holds the records every node of the fleet shares.
	Store sandbox.Store
	// Peers are the other nodes.
	Peers Peers
	// Blobs is the blob store sandboxes move through; nil: none, and no
	// sandbox leaves this node.
	Blobs *Blobs
	// Node is this node's name.
	Node   string
	Logger *slog.Logger
}

// Node is this dend as one node of the fleet, in the sandboxes' terms:
// it moves sandboxes to other nodes and adopts those they hand over,
// records the sandboxes of nodes declared lost and says what brings
// them back.
type Node struct {
	svc   *sandbox.Service
	store sandbox.Store
	peers Peers
	blobs *Blobs
	self  string
	log   *slog.Logger
}

// New returns the Node cfg describes.
func New(cfg Config) *Node {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Node{svc: cfg.Service, store: cfg.Store, peers: cfg.Peers, blobs: cfg.Blobs, self: cfg.Node, log: cfg.Logger}
}
