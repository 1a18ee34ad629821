package recovery

import (
	"log/slog"

	"github.com/den-dev/den/internal/sandbox"
)

// Config is what a Service needs.
type Config struct {
	// Sandboxes is the core whose steps a recovery is made of.
	Sandboxes *sandbox.Service
	// Store is the core's store of records.
	Store sandbox.Store
	// Node is this node's name, as the core knows it (sandbox.Config.Node).
	Node string
	// Fleet is the rest of the fleet, as the core has it
	// (sandbox.Config.Fleet); nil outside a fleet.
	Fleet  sandbox.Fleet
	Logger *slog.Logger
}

// Service recovers sandboxes.
type Service struct {
	svc   *sandbox.Service
	store sandbox.Store
	node  string
	fleet sandbox.Fleet
	log   *slog.Logger
	// takeOver takes over the sandboxes of lost nodes; nil outside a
	// fleet. Set once, before verbs are served (UseTakeOver).
	takeOver TakeOver
}

// New returns the recovery of cfg.Sandboxes.
func New(cfg Config) *Service {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Service{svc: cfg.Sandboxes, store: cfg.Store, node: cfg.Node, fleet: cfg.Fleet, log: cfg.Logger}
}
