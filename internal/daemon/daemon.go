package daemon

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/internal/atomicfile"
	"github.com/den-dev/den/internal/audit"
	"github.com/den-dev/den/internal/auth"
	"github.com/den-dev/den/internal/checkpointgc"
	"github.com/den-dev/den/internal/checkpointing"
	"github.com/den-dev/den/internal/cluster"
	"github.com/den-dev/den/internal/e2b"
	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/events"
	"github.com/den-dev/den/internal/exposing"
	"github.com/den-dev/den/internal/fleet"
	"github.com/den-dev/den/internal/granting"
	"github.com/den-dev/den/internal/guest"
	"github.com/den-dev/den/internal/httpapi"
	"github.com/den-dev/den/internal/httpapi/fleetapi"
	"github.com/den-dev/den/internal/idempotency"
	"github.com/den-dev/den/internal/idling"
	"github.com/den-dev/den/internal/image"
	"github.com/den-dev/den/internal/imagecrypt"
	"github.com/den-dev/den/internal/inproc"
	"github.com/den-dev/den/internal/limiting"
	"github.com/den-dev/den/internal/mcpserver"
	"github.com/den-dev/den/internal/metrics"
	"github.com/den-dev/den/internal/netns"
	"github.com/den-dev/den/internal/networking"
	"github.com/den-dev/den/internal/owners"
	"github.com/den-dev/den/internal/peering"
	peerviews "github.com/den-dev/den/internal/peers"
	"github.com/den-dev/den/internal/rebase"
	"github.com/den-dev/den/internal/recovery"
	"github.com/den-dev/den/internal/runlogs"
	"github.com/den-dev/den/internal/running"
	"github.com/den-dev/den/internal/runoutput"
	"github.com/den-dev/den/internal/runsc"
	"github.com/den-dev/den/internal/sampling"
	"github.com/den-dev/den/internal/sandbox"
	"github.com/den-dev/den/internal/secret"
	"github.com/den-dev/den/internal/servicing"
	"github.com/den-dev/den/internal/shutdown"
	"github.com/den-dev/den/internal/storage"
	"github.com/den-dev/den/internal/storage/btrfs"
	copydriver "github.com/den-dev/den/internal/storage/copy"
	"github.com/den-dev/den/internal/ui"
	"github.com/den-dev/den/internal/version"
	"github.com/den-dev/den/internal/warming"
)

// Run starts dend and serves until ctx ends. On return the API is closed;
// sandboxes keep running for the next dend to reattach.
func Run(ctx context.Context, cfg Config, log *slog.Logger) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	// Before anything is opened or mounted: a den-init that could not
	// start in a sandbox stops dend here, saying why.
	if err := runsc.CheckInit(cfg.Init); err != nil {
		return err
	}
	for _, d := range []string{cfg.DataDir, cfg.RunDir, filepath.Dir(cfg.Socket)} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("creating %s: %w", d, err)
		}
	}
	st, fleetRecords, claim, closeStore, err := openStore(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer closeStore()
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	if claim != nil {
		go func() {
			select {
			case err := <-claim.Lost():
				stop(err)
			case <-ctx.Done():
			}
		}()
	}
	// The blob store too: a wrong URL or key stops dend before it
	// changes anything on the host.
	bucket, err := openBucket(ctx, cfg.Blobs, log)
	if err != nil {
		return err
	}
	// The pool after the store: a dend refused its database makes no pool.
	pool, err := openStorage(ctx, cfg, log)
	if err != nil {
		return err
	}
	off, err := newOffsite(bucket, cfg.Blobs, pool, log)
	if err != nil {
		return err
	}
	// secrets is both what the API sets, lists and removes and where
	// sandboxes' execs get the secrets granted to them.
	secrets, err := secret.Open(ctx, secret.Config{KeyFile: cfg.SecretsKeyFile(), Store: st, Logger: log})
	if err != nil {
		return fmt.Errorf("opening the secret store: %w", err)
	}
	tokens, err := openTokens(cfg, st, log)
	if err != nil {
		return err
	}

	images, err := image.NewManager(image.Config{Pool: pool, Records: st, Logger: log, Mirror: cfg.DebianMirror, CacheDir: cfg.ImageCacheDir()})
	if err != nil {
		return err
	}
	initDir, initVersion, err := installInit(cfg)
	if err != nil {
		return err
	}
	upstreams, err := cfg.Upstreams()
	if err != nil {
		return err
	}
	network, err := netns.Open(ctx, netns.Config{Prefix: cfg.Subnet, Upstreams: upstreams, Dir: netns.Dir(cfg.RunDir), Logger: log})
	if err != nil {
		return err
	}
	defer func() {
		if err := network.Close(); err != nil {
			log.Warn("removing den's network from the host", "err", err)
		}
	}()
	resolvConf := filepath.Join(cfg.DataDir, "resolv.conf")
	if err := atomicfile.Write(resolvConf, network.ResolvConf(), 0o644); err != nil {
		return fmt.Errorf("writing the sandboxes' resolv.conf: %w", err)
	}
	rt, err := runsc.New(ctx, runsc.Config{
		Binary:     cfg.Runsc,
		Root:       filepath.Join(cfg.RunDir, "runsc"),
		BundleDir:  filepath.Join(cfg.RunDir, "bundles"),
		LogDir:     filepath.Join(cfg.DataDir, "logs"),
		InitDir:    initDir,
		ResolvConf: resolvConf,
		Debug:      cfg.Debug,
		NoPacer:    cfg.NoCgroupPacer,
	}, log)
	if err != nil {
		return err
	}
	defer func() { // after the service, before the network
		cctx, cancel := context.WithTimeout(context.Background(), finalCollectTimeout)
		defer cancel()
		if err := rt.Close(cctx); err != nil {
			log.Warn("removing the engine's leftovers from the host", "err", err)
		}
	}()
	sealer, err := imagecrypt.New(imagecrypt.Config{KeyFile: cfg.ImagesKeyFile(), Scratch: cfg.ImagesScratch(), Logger: log})
	if err != nil {
		return err
	}
	opened, err := cfg.OpenedPrivate()
	if err != nil {
		return err
	}
	disk, err := diskPolicy(ctx, cfg, pool, log)
	if err != nil {
		return err
	}
	// In a fleet: the forwarder and the peers sandboxes move to come
	// before the service; the node joins once its sandboxes are settled.
	var fl *fleetNode
	var forwarder httpapi.Cluster
	var movers sandbox.Fleet
	var lease sandbox.Lease // nil, not a nil *fleet.Fence, outside a fleet
	var portsKey []byte
	if fleetRecords != nil {
		if fl, err = newFleet(ctx, cfg, fleetRecords, st, rt.Version(), log); err != nil {
			return err
		}
		forwarder, movers, portsKey = fl.forwarder, fl.peers, fl.portsKey
		lease = fl.fence
	} else if portsKey, err = loadPortsKey(cfg.PortsKeyFile()); err != nil {
		return err
	}
	// What happens to this node's sandboxes: the core publishes it, the
	// API's GET /v1/events follows it.
	hub := events.NewHub()
	// Clients following runs' output: runlogs registers them, the core
	// ends their streams as a sandbox goes to sleep.
	followers := &runoutput.Followers{}
	scfg := sandbox.Config{
		Store: st, Volumes: pool, Runtime: rt, Network: network, Images: images, Secrets: secrets, Init: initVersion,
		ViewsDir:      filepath.Join(cfg.RunDir, "views"),
		ResolvConf:    string(network.ResolvConf()),
		Sealer:        sealer,
		Reach:         network.Reach(opened),
		Dial:          func(addr netip.AddrPort, token string) sandbox.Guest { return guest.New(addr, token) },
		Logger:        log,
		Node:          cfg.Node,
		RunsDir:       filepath.Join(cfg.DataDir, "runs"),
		Output:        cfg.OutputLimits(),
		CheckpointDir: filepath.Join(cfg.DataDir, "checkpoints"),
		StopGrace:     cfg.StopGrace,
		BootTimeout:   cfg.BootTimeout,
		Policy:        cfg.Policy(),
		EphemeralTTL:  cfg.EphemeralTTL,
		Disk:          disk,
		MinTTL:        cfg.MinTTL,
		Quotas:        cfg.quotas(st),
		Fleet:         movers,
		Lease:         lease,
		Events:        hub,
		Followers:     followers,
	}
	wcfg, err := cfg.warmConfig()
	if err != nil {
		return err
	}
	// Lifecycle verbs report their latency to the metrics from the
	// start; the figures read at each scrape come from the service.
	prom := metrics.New(version.Version, rt.Version(), log.With("component", "metrics"))
	scfg.Observer = prom
	if err := peerviews.SetUp(scfg.ViewsDir); err != nil {
		return err
	}
	defer func() {
		if err := peerviews.LetGo(scfg.ViewsDir); err != nil {
			log.Warn("leaving the views directory mounted", "err", err)
		}
	}()
	svc, err := sandbox.NewService(scfg)
	if err != nil {
		return err
	}
	// Sandboxes' services: handed to den-init at each boot, each start
	// recorded as a run, and their verbs.
	services := servicing.New(servicing.Config{Sandboxes: svc, Logger: log})
	svc.UseServices(services)
	if err := useWarm(svc, scfg, wcfg); err != nil {
		return err
	}
	// What each running sandbox used, sampled from the host.
	sampler := sampling.New(sampling.Config{Sandboxes: svc, Engine: scfg.Runtime, Volumes: scfg.Volumes, Network: scfg.Network, Logger: log})
	if err := prom.Watch(promSource{svc, sampler}); err != nil {
		return err
	}
	// Checkpoints nothing needs go at each idle tick and as removals
	// free them.
	gc := checkpointgc.New(checkpointgc.Config{Sandboxes: svc, Store: st, Volumes: pool, CheckpointDir: scfg.CheckpointDir, Node: cfg.Node, Logger: log})
	svc.UseCollector(gc)
	// `den recover`, and settling the records and the host below.
	recov := recovery.New(recovery.Config{Sandboxes: svc, Store: st, Runtime: rt, Network: network, Volumes: pool,
		Node: cfg.Node, Fleet: movers, Logger: log})
	// With a blob store, checkpoints and images are kept there too.
	var blobs *fleet.Blobs
	if off != nil {
		blobs = fleet.NewBlobs(fleet.BlobsConfig{Service: svc, Store: st, Volumes: pool, Offsite: off, Node: cfg.Node, Logger: log})
	}
	var fleetService fleetapi.Fleet // nil, not a nil *fleet.Node, outside a fleet
	if fl != nil {
		fl.attach(svc, st, blobs, recov, log)
		fleetService = fl.node
	}
	defer func() {
		svc.Close()
		if errors.Is(context.Cause(ctx), context.Canceled) {
			// A clean stop: what sandboxes removed just before freed goes
			// now, not at a collection this dend will not make. Not when
			// the store's claim was lost: another dend may own this node.
			cctx, cancel := context.WithTimeout(context.Background(), finalCollectTimeout)
			defer cancel()
			gc.Collect(cctx)
		}
	}()
	// The sealer learns which keys sealed the images here before
	// recovery may seal one (a rollback, a salvaged hibernation), and
	// again after it, which may have removed some.
	if err := expectSealed(ctx, st, sealer); err != nil {
		return err
	}
	if err := recov.Recover(ctx); err != nil {
		return err
	}
	if err := expectSealed(ctx, st, sealer); err != nil {
		return err
	}
	if err := pruneInits(ctx, svc, initDir, log); err != nil {
		log.Warn("removing den-init versions nothing needs", "err", err)
	}
	sayUnwakeable(ctx, svc, log)
	if blobs != nil {
		if err := blobs.Run(ctx, blobsRetry, cfg.Blobs.GCInterval); err != nil {
			return err
		}
		go watchBucket(ctx, bucket, blobs.RetryUploads, log)
	}
	if fl != nil {
		if err := fl.join(ctx, svc, stop); err != nil {
			return err
		}
		// From now on the claim is taken back after a cut only while
		// the node's record is still this join's.
		claim.Joined(fl.member.Self().Epoch)
		fl.fence.Lift(ctx, svc, cmp.Or(cfg.NodeLease, cluster.DefaultLease))
	}
	down := shutdownHost(cfg, svc, log)
	wakeAtBoot(ctx, down, log)
	idler := idling.New(idling.Config{Sandboxes: svc, Records: st, Collector: gc, Logger: log})
	idler.Run(cfg.IdleInterval)
	runWarm(svc)
	sampling.WatchLimits(svc, scfg.Runtime, time.Second, log)
	sampler.Run(metricsInterval, metricsWindow)
	go audit.Retain(ctx, st, cfg.AuditRetention, time.Hour, log)
	// Requests still in progress were the last dend's: nobody will answer
	// them now, so a client asking learns they may or may not have run.
	interrupted, err := st.MarkInterrupted(ctx)
	if err != nil {
		return err
	}
	if interrupted > 0 {
		log.Warn("requests were interrupted when dend last stopped", "requests", interrupted)
	}
	go idempotency.Retain(ctx, st, idempotency.DefaultRetention, time.Hour, log)

	health := func(ctx context.Context) api.Health {
		d := svc.DiskStatus()
		return api.Health{Status: "ok", Version: version.Version, RunscVersion: rt.Version(), Storage: pool.Name(),
			Disk: &api.DiskHealth{FreeBytes: d.FreeBytes, ReserveBytes: d.ReserveBytes, Low: d.Low}, Pool: poolHealth(ctx, svc, log),
			Warm: warmHealth(svc.WarmHealth(ctx)), Blobs: blobsHealth(bucket)}
	}
	// MCP's tools call the API in process, with the caller's rights.
	self := inproc.New()
	defer self.Close()
	mcpHTTP := mcpserver.NewHTTP(mcpserver.HTTPConfig{API: self, IsLocal: httpapi.IsLocal, Caller: httpapi.Caller,
		Limits: cfg.MCP, Logger: log.With("component", "mcp")})
	// So does the E2B door, for both of E2B's planes.
	// Its sandboxes' tokens are derived from the ports key, which outlives
	// dend, so they keep working across restarts.
	e2bDoor := e2b.New(e2b.Config{API: self, IsLocal: httpapi.IsLocal, MinTimeout: cfg.E2BMinTimeout, Key: portsKey, Domain: cfg.E2BDomain,
		Logger: log.With("component", "e2b")})
	ports := exposing.New(exposing.Config{Sandboxes: svc})
	logs := runlogs.New(runlogs.Config{Sandboxes: svc, Followers: followers})
	runs := running.New(running.Config{Sandboxes: svc, Records: st})
	gate, err := newGate(cfg, fl, svc, runs, ports, logs, tokens, st, log)
	if err != nil {
		return err
	}
	peerVerbs := peering.New(peering.Config{Sandboxes: svc, Volumes: pool, ViewsDir: scfg.ViewsDir, Logger: log})
	exports := exporter(svc, pool, log)
	handler := httpapi.New(httpapi.Config{Sandboxes: svc, Images: images, Logger: log, Health: health, Version: version.Version,
		Tokens: tokens, SSHKeys: tokens, Audit: st, Secrets: secrets, PortsKey: portsKey, PortsDomain: cfg.PortsDomain, Owners: owners.New(owners.Config{Sandboxes: svc, Store: st, Records: st}), Requests: st,
		MCP: mcpHTTP, E2B: e2bDoor, Cluster: forwarder, Blobs: blobService(blobs), Warm: warming.New(warming.Config{Sandboxes: svc, Images: st}), Samples: sampler, Logs: logs, Runs: runs, Checkpoints: checkpointing.New(checkpointing.Config{Sandboxes: svc, Store: st}), UI: ui.Handler(),
		Events: hub, Stopping: ctx.Done(), Metrics: prom.Handler(), SSH: sshRelay(gate), Policies: idler, Limits: limiting.New(svc), Network: networking.New(networking.Config{Sandboxes: svc, Logger: log}), Services: services, Grants: granting.New(granting.Config{Sandboxes: svc, Logger: log}), Ports: ports, Rebase: rebase.New(rebase.Config{Sandboxes: svc, Copier: storage.PathCopier{}, Logger: log}), Peers: peerVerbs, Export: exports, Recover: recov,
		Nodes: drainer(cfg, fleetRecords, fl, svc, st, rt.Version(), log), Fleet: fleetService})
	self.Serve(httpapi.Local(handler), handler)
	if err := startSSH(ctx, cfg, gate, log); err != nil {
		return err
	}
	if err := serve(ctx, cfg, handler, prom.Handler(), log); err != nil {
		return err
	}
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err // the store's claim was lost
	}
	if fl != nil {
		// The node's lease ended with ctx: hibernating now would race the
		// nodes that take its sandboxes over. A fleet's node is drained
		// before a reboot (`den node drain`).
		log.Info("dend stopped; its sandboxes stay as they are (in a fleet, drain a node before its host reboots)")
		return nil
	}
	sleepAtStop(cfg, down, shutdown.HostStopping, log)
	return nil
}

// blobService is what collects the blob store on request, or nil (the
// route answers 503) when dend has none.
func blobService(blobs *fleet.Blobs) fleetapi.Blobs {
	if blobs == nil {
		return nil
	}
	return blobs
}

// finalCollectTimeout bounds the collection of checkpoints at a clean
// stop.
const finalCollectTimeout = 20 * time.Second

// Running sandboxes are sampled this often, and their samples kept this
// long (GET /v1/sandboxes/{name}/metrics): 720 samples a sandbox at most.
const (
	metricsInterval = 5 * time.Second
	metricsWindow   = time.Hour
)

// promSource is what the metrics read at each scrape: the sampler's
// newest readings, the core's pool and warm pools.
type promSource struct {
	*sandbox.Service
	*sampling.Sampler
}

var _ metrics.Source = promSource{}

// pool is what dend needs of a storage driver.
type pool interface {
	storage.Driver
}

func openStorage(ctx context.Context, cfg Config, log *slog.Logger) (pool, error) {
	dir := filepath.Join(cfg.DataDir, "pool")
	if cfg.Storage == StorageCopy {
		return copydriver.Open(dir, log)
	}
	bc := btrfs.Config{Dir: dir, LoopFile: filepath.Join(cfg.DataDir, "pool.img"), LoopSize: cfg.PoolSize}
	_, err := btrfs.Open(ctx, bc, log)
	if err == nil {
		return withReserve(ctx, cfg, bc, log)
	}
	if cfg.Storage == StorageBtrfs {
		return nil, fmt.Errorf("opening the btrfs pool: %w", err)
	}
	log.Warn("btrfs pool unavailable; using the copy driver (snapshots copy files)", "err", err)
	return copydriver.Open(filepath.Join(cfg.DataDir, "pool-copy"), log)
}

// installInit installs this dend's den-init as a version of its own under
// DATA_DIR/init, keeping the others: memory images need theirs back.
func installInit(cfg Config) (dir, version string, err error) {
	dir = filepath.Join(cfg.DataDir, "init")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", fmt.Errorf("creating init directory: %w", err)
	}
	version, err = runsc.InstallInit(dir, cfg.Init)
	return dir, version, err
}

// pruneInits removes the versions of den-init no sandbox runs and no
// memory image needs. It runs before the API serves, so nothing starts
// meanwhile.
func pruneInits(ctx context.Context, svc *sandbox.Service, dir string, log *slog.Logger) error {
	keep, err := svc.InitVersions(ctx)
	if err != nil {
		return err
	}
	removed, err := runsc.PruneInits(dir, keep)
	if len(removed) > 0 {
		log.Info("removed den-init versions nothing needs", "versions", removed)
	}
	return err
}

// sayUnwakeable logs, once at start, each hibernated sandbox this dend
// cannot wake with its processes, and why: an upgrade that brought
// another runsc leaves them so.
func sayUnwakeable(ctx context.Context, svc *sandbox.Service, log *slog.Logger) {
	refused, err := svc.Unwakeable(ctx)
	if err != nil {
		log.Warn("checking which hibernated sandboxes can wake here", "err", err)
		return
	}
	for name, why := range refused {
		log.Warn("a hibernated sandbox cannot wake with its processes on this host: waking it puts it in error; `den recover NAME --cold` boots its files",
			"sandbox", name, "reason", why)
	}
}

func serve(ctx context.Context, cfg Config, handler, metricsHandler http.Handler, log *slog.Logger) error {
	if err := removeStaleSocket(cfg.Socket); err != nil {
		return err
	}
	ul, err := net.Listen("unix", cfg.Socket)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", cfg.Socket, err)
	}
	if err := os.Chmod(cfg.Socket, 0o600); err != nil {
		ul.Close()
		return fmt.Errorf("restricting %s: %w", cfg.Socket, err)
	}
	// The socket is root's alone: its callers are admins. TCP callers
	// need a bearer token.
	servers := []*http.Server{{Handler: httpapi.Local(handler), ReadHeaderTimeout: 10 * time.Second}}
	listeners := []net.Listener{ul}
	if cfg.Listen != "" {
		tl, err := net.Listen("tcp", cfg.Listen)
		if err != nil {
			ul.Close()
			return fmt.Errorf("listening on %s: %w", cfg.Listen, err)
		}
		servers = append(servers, &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second})
		listeners = append(listeners, tl)
	}
	if cfg.MetricsListen != "" {
		ml, err := net.Listen("tcp", cfg.MetricsListen)
		if err != nil {
			for _, l := range listeners {
				l.Close()
			}
			return fmt.Errorf("listening on %s: %w", cfg.MetricsListen, err)
		}
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", metricsHandler)
		servers = append(servers, &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second})
		listeners = append(listeners, ml)
	}
	errc := make(chan error, len(servers))
	for i, srv := range servers {
		log.Info("dend listening", "addr", listeners[i].Addr().String())
		go func() { errc <- srv.Serve(listeners[i]) }()
	}
	select {
	case <-ctx.Done():
	case err := <-errc:
		if !errors.Is(err, http.ErrServerClosed) {
			log.Error("listener failed", "err", err)
		}
	}
	log.Info("dend shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, srv := range servers {
		srv.Shutdown(sctx)
	}
	os.Remove(cfg.Socket)
	return nil
}

// removeStaleSocket deletes a socket file no live dend answers on, and
// refuses to start beside a live one.
func removeStaleSocket(path string) error {
	if _, err := os.Stat(path); err != nil {
		return nil
	}
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return errdefs.WithHint(errdefs.Conflict("another dend is already serving %s", path),
			"stop it first, or give this one another --socket and --data-dir")
	}
	return os.Remove(path)
}

// openTokens makes the API token service. With a TCP listener, the token
// file of den before API tokens still works there, as an admin token.
func openTokens(cfg Config, st records, log *slog.Logger) (*auth.Service, error) {
	legacy := ""
	if cfg.Listen != "" {
		var err error
		if legacy, err = loadToken(cfg); err != nil {
			return nil, err
		}
	}
	return auth.New(auth.Config{Store: st, Keys: st, LegacyToken: legacy, Logger: log})
}

// loadToken reads the TCP listener's token, creating one if needed.
func loadToken(cfg Config) (string, error) {
	path := cfg.TokenFile
	if path == "" {
		path = filepath.Join(cfg.DataDir, "token")
	}
	b, err := os.ReadFile(path)
	if err == nil && len(strings.TrimSpace(string(b))) >= 16 {
		return strings.TrimSpace(string(b)), nil
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("reading token: %w", err)
	}
	raw := make([]byte, 24)
	rand.Read(raw)
	tok := hex.EncodeToString(raw)
	if err := os.WriteFile(path, []byte(tok+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("writing token: %w", err)
	}
	return tok, nil
}

// drainer serves /v1/nodes.
func drainer(cfg Config, records fleetStore, fl *fleetNode, svc *sandbox.Service, st sandbox.Store, runscVersion string, log *slog.Logger) *nodes {
	n := &nodes{self: cfg.Node, fleet: records, info: nodeInfo(cfg, st, runscVersion), svc: svc, store: st, log: log}
	if fl != nil {
		n.place, n.moves = fl.peers.PlaceAway, fl.node
	}
	return n
}

// expectSealed tells the sealer which keys sealed the memory images the
// records name.
func expectSealed(ctx context.Context, st sandbox.Store, sealer *imagecrypt.Sealer) error {
	sealed, err := sealedKeys(ctx, st)
	if err != nil {
		return err
	}
	sealer.Expect(sealed)
	return nil
}

// sealedKeys returns the ids of the keys the memory images here were
// sealed with, so the sealer refuses to mix in another.
func sealedKeys(ctx context.Context, st sandbox.Store) ([]string, error) {
	cks, err := st.ListCheckpoints(ctx, "")
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, ck := range cks {
		if ck.Memory && ck.Manifest.Sealed != "" {
			seen[ck.Manifest.Sealed] = true
		}
	}
	ids := make([]string, 0, len(seen))
	for id := range seen {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids, nil
}
