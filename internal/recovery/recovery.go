package recovery

import (
	"log/slog"

	"github.com/den-dev/den/internal/sandbox"
)

// Config is what a Service needs.
type Config struct {
	// Sandboxes is the core whose steps a recovery is made of.
	Sandboxes *sandbox.Service
	// Store, Runtime, Network and Volumes are the adapters the core was
	// given (sandbox.Config): recovery reads what they hold of this
	// host's sandboxes, and removes what no record owns.
	Store   sandbox.Store
	Runtime sandbox.Runtime
	Network sandbox.Network
	Volumes sandbox.Volumes
	// Node is this node's name, as the core knows it (sandbox.Config.Node).
	Node string
	// Fleet is the rest of the fleet, as the core has it
	// (sandbox.Config.Fleet); nil outside a fleet.
	Fleet  sandbox.Fleet
	Logger *slog.Logger
}

// Service recovers sandboxes.
type Service struct {
	svc     *sandbox.Service
	store   sandbox.Store
	runtime sandbox.Runtime
	network sandbox.Network
	volumes sandbox.Volumes
	node    string
	fleet   sandbox.Fleet
	log     *slog.Logger
	// takeOver takes over the sandboxes of lost nodes; nil outside a
	// fleet. Set once, before verbs are served (UseTakeOver).
	takeOver TakeOver
}

// New returns the recovery of cfg.Sandboxes.
func New(cfg Config) *Service {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Service{svc: cfg.Sandboxes, store: cfg.Store, runtime: cfg.Runtime, network: cfg.Network, volumes: cfg.Volumes,
		node: cfg.Node, fleet: cfg.Fleet, log: cfg.Logger}
}
