package main

import "strings"

// layer is a rank in den's house: a package may import packages of its
// own layer or of lower ones, never of a higher one. docs/architecture.md
// describes each.
type layer struct {
	rank int
	name string
}

var (
	base         = layer{1, "base"}
	capabilities = layer{2, "capability below the core"}
	coreLayer    = layer{3, "core"}
	adapters     = layer{4, "adapter"}
	above        = layer{5, "capability above the core"}
	doors        = layer{6, "door"}
	wiring       = layer{7, "wiring"}
	programs     = layer{8, "program"}
)

// layers places each of den's packages; a package below one of these
// paths takes its layer unless it has a line of its own. A new package
// needs a line here, or the measure fails.
var layers = map[string]layer{
	// What everything may use: wire types, error classes, the guest
	// protocol, the Go client, and leaves that know nothing of sandboxes.
	"api":                            base,
	"client":                         base,
	"internal/errdefs":               base,
	"internal/fspath":                base,
	"internal/atomicfile":            base,
	"internal/keyfile":               base,
	"internal/version":               base,
	"internal/testproc":              base,
	"internal/guest":                 base,
	"internal/initd":                 base,
	"internal/initd/files":           base,
	"internal/initd/sudo":            base,
	"internal/initd/users":           base,
	"internal/initd/httpio":          base,
	"internal/audit":                 base,
	"internal/idempotency":           base,
	"internal/blob":                  base,
	"internal/cluster":               base,
	"internal/imagecrypt":            base,
	"internal/inproc":                base,
	"internal/specs":                 base,
	"internal/ui":                    base,
	"internal/e2b/envdpb":            base,
	"internal/mcpserver/mcptest":     base,
	"internal/store/postgres/pgtest": base,
	"internal/blob/s3/miniotest":     base,
	"bench/ticker":                   base,
	"integration/docblock":           base,

	// Capabilities the core uses through small interfaces it declares:
	// each owns its state behind its own type and lock, and none imports
	// the core.
	"internal/quota":     capabilities,
	"internal/grant":     capabilities,
	"internal/runoutput": capabilities,
	"internal/events":    capabilities,
	"internal/usage":     capabilities,
	"internal/peers":     capabilities,
	"internal/expose":    capabilities,
	"internal/netpolicy": capabilities,
	"internal/transfer":  capabilities,
	"internal/warm":      capabilities,
	"internal/idle":      capabilities,
	"internal/memimage":  capabilities,
	"internal/exitwatch": capabilities,
	"internal/retention": capabilities,

	// The domain.
	"internal/sandbox": coreLayer,

	// What the core declares and others implement: engine, storage,
	// records, network, images, secrets, the Prometheus exposition.
	"internal/runsc":   adapters,
	"internal/storage": adapters,
	"internal/store":   adapters,
	"internal/netns":   adapters,
	"internal/egress":  adapters,
	"internal/image":   adapters,
	"internal/secret":  adapters,
	"internal/offsite": adapters,
	"internal/auth":    adapters,
	"internal/metrics": adapters,
	// A real core on SQLite for the tests of the packages above it.
	"internal/sandbox/sandboxtest": adapters,

	// What sits above the core and uses its verbs: the fleet (blob
	// store, moves, node loss, the lease fence), owners' quotas and grants.
	"internal/fleet":  above,
	"internal/owners": above,

	// Verbs composed of the core's own steps: rebase and the setup it
	// uses.
	"internal/rebase": above,

	// An agent's record and newest checkpoint as a sealed archive, and
	// the import that makes it again on another dend.
	"internal/export": above,

	// Peers' verbs: adding, refreshing and removing a sandbox's views.
	"internal/peering": above,

	// A host's shutdown as a hibernation, and the wake at boot after it.
	"internal/shutdown": above,

	// Recovery: `den recover`, and settling the records and the host
	// when dend starts.
	"internal/recovery": above,

	// Checkpoint collection: what goes once nothing needs it.
	"internal/checkpointgc": above,

	// The checkpoints' list, reading and removal: the verbs that change
	// no sandbox's state.
	"internal/checkpointing": above,

	// The warm pools' admin verbs: setting a pool's target, listing them;
	// booting, handing over and removing their instances.
	"internal/warming": above,

	// Reading running sandboxes from the host: usage samples and limit
	// watches.
	"internal/sampling": above,

	// The idle loop: applying sandboxes' idle policies, and changing them.
	"internal/idling": above,

	// Granting secrets: which a sandbox's commands get.
	"internal/granting": above,

	// Exposed ports' verbs: exposing, unexposing, revoking links, where a
	// request goes; reaching any port for the SSH gateway.
	"internal/exposing": above,

	// Runs' output written to a client, up to its end or following it.
	"internal/runlogs": above,

	// Runs' verbs that change no sandbox's state: their records, input,
	// window sizes and signals, and a sandbox's processes.
	"internal/running": above,

	// The verb that changes a sandbox's resource limits.
	"internal/limiting": above,

	// Sandboxes' services: their verbs, handing them to den-init, and
	// each start of one recorded as a run.
	"internal/servicing": above,

	// The verb that changes what a sandbox may reach.
	"internal/networking": above,

	// The front doors: each translates its protocol to the Service's verbs.
	"internal/httpapi":           doors,
	"internal/httpapi/httpx":     doors,
	"internal/httpapi/portproxy": doors,
	"internal/httpapi/fleetapi":  doors,
	"internal/e2b":               doors,
	"internal/mcpserver":         doors,
	"internal/sshgate":           doors,

	"internal/daemon": wiring,

	"cmd": programs,

	// den's command groups, put together by cmd/den's root command, and
	// what they share (the client set-up, errors, tables and JSON).
	"cmd/den/internal/cli":         programs,
	"cmd/den/internal/lifecycle":   programs,
	"cmd/den/internal/checkpoints": programs,
	"cmd/den/internal/runs":        programs,
	"cmd/den/internal/files":       programs,
	"cmd/den/internal/network":     programs,
	"cmd/den/internal/services":    programs,
	"cmd/den/internal/access":      programs,
	"cmd/den/internal/images":      programs,
	"cmd/den/internal/fleet":       programs,
	"cmd/den/internal/export":      programs,

	"bench":                        programs,
	"integration":                  programs,
	"integration/docblock/extract": programs,
}

// layerOf finds the layer of package path: its own line, or that of the
// nearest enclosing path with one.
func layerOf(path string) (layer, bool) {
	for p := path; ; {
		if l, ok := layers[p]; ok {
			return l, true
		}
		i := strings.LastIndex(p, "/")
		if i < 0 {
			return layer{}, false
		}
		p = p[:i]
	}
}
