// Command dend is den's daemon: it owns the sandboxes on this host and
// serves the REST API on a unix socket (and, if asked, on TCP).
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/docker/go-units"

	"github.com/den-dev/den/internal/daemon"
	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/sandbox"
	"github.com/den-dev/den/internal/version"
)

func main() {
	cfg := daemon.Default()
	fs := flag.NewFlagSet("dend", flag.ExitOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "dend %s: den's daemon.\n\nUsage: dend [flags]\n\nEvery flag can also be set as DEN_<FLAG> in the environment (e.g. DEN_DATA_DIR).\n\nFlags:\n", version.Version)
		fs.PrintDefaults()
	}
	pool := ""
	// Defaults that are this machine's (paths beside dend, the host's
	// name) are said in words, so that help and the man page made from it
	// do not carry the builder's; left unset, they apply after parsing.
	machine := []struct {
		v   *string
		def string
	}{{&cfg.Runsc, cfg.Runsc}, {&cfg.Init, cfg.Init}, {&cfg.Node, cfg.Node}}
	fs.StringVar(&cfg.DataDir, "data-dir", env("DEN_DATA_DIR", cfg.DataDir), "where records, the storage pool and run output live")
	fs.StringVar(&cfg.RunDir, "run-dir", env("DEN_RUN_DIR", cfg.RunDir), "engine state that must not survive a reboot")
	fs.StringVar(&cfg.Socket, "socket", env("DEN_SOCKET", cfg.Socket), "unix socket for the local CLI (root only)")
	fs.StringVar(&cfg.Listen, "listen", env("DEN_LISTEN", ""), "also serve on this TCP address (bearer token required), e.g. 127.0.0.1:7070")
	fs.StringVar(&cfg.MetricsListen, "metrics-listen", env("DEN_METRICS_LISTEN", ""), "also serve /metrics, without a token, on this TCP address, e.g. 127.0.0.1:9464 (on --listen /metrics needs an admin or admin:read token)")
	fs.StringVar(&cfg.SSHListen, "ssh-listen", env("DEN_SSH_LISTEN", ""), "serve the SSH gateway on this address, e.g. :2222: `ssh SANDBOX@HOST -p 2222` with a key from `den ssh-key add` (off by default)")
	fs.StringVar(&cfg.TokenFile, "token-file", env("DEN_TOKEN_FILE", ""), "an admin token for --listen, created if missing (default DATA_DIR/token); `den token create` makes scoped ones")
	fs.StringVar(&cfg.SecretsKey, "secrets-key", env("DEN_SECRETS_KEY", ""), "absolute path of the key that encrypts secrets, kept outside the database; created if missing (default DATA_DIR/secrets.key)")
	fs.StringVar(&cfg.Runsc, "runsc", env("DEN_RUNSC", ""), "the pinned runsc binary (default: runsc in dend's own directory)")
	fs.StringVar(&cfg.Init, "init", env("DEN_INIT", ""), "the den-init binary: a static executable (built with CGO_ENABLED=0), which runs as every sandbox's first process (default: den-init in dend's own directory)")
	fs.StringVar(&cfg.Storage, "storage", env("DEN_STORAGE", cfg.Storage), "storage driver: auto, btrfs or copy")
	fs.StringVar(&pool, "pool-size", env("DEN_POOL_SIZE", "64G"), "size of the sparse btrfs loop file made when the data dir is not on btrfs")
	fs.StringVar(&cfg.Subnet, "subnet", env("DEN_SUBNET", cfg.Subnet), "private IPv4 range for sandbox links; its last 4 addresses are den's (the resolver)")
	fs.StringVar(&cfg.PortsDomain, "ports-domain", env("DEN_PORTS_DOMAIN", ""), "also serve exposed ports by host name, PORT-NAME.DOMAIN (point *.DOMAIN at dend's --listen address)")
	fs.StringVar(&cfg.E2BDomain, "e2b-domain", env("DEN_E2B_DOMAIN", ""), "where E2B's SDK finds sandboxes' servers, PORT-ID.DOMAIN[:PORT] (default e2b.localhost and the port the caller reached dend at; point *.DOMAIN at dend's --listen address)")
	fs.StringVar(&cfg.DNSUpstreams, "dns-upstream", env("DEN_DNS_UPSTREAM", ""), "name servers den's resolver asks for the names a policy allows, ADDR[:PORT],... (default: the host's /etc/resolv.conf)")
	fs.StringVar(&cfg.AllowPrivate, "allow-private", env("DEN_ALLOW_PRIVATE", ""), "private ranges every owner's network rules may name, CIDR,... (default: none; `den owner set --allow-private` opens one to one owner)")
	fs.StringVar(&cfg.Warm, "warm", env("DEN_WARM", ""), "instances of each image this node keeps booted ahead of demand, IMAGE=N,... e.g. busybox=4 (`den image warm IMAGE N` overrides it per image)")
	fs.StringVar(&cfg.Node, "node", env("DEN_NODE", ""), "this dend's node name in a fleet (dends sharing one --store postgres://...) (default: this host's name)")
	fs.StringVar(&cfg.PeerURL, "peer-url", env("DEN_PEER_URL", ""), "in a fleet: the URL other nodes reach this dend's --listen at (default: http://LISTEN, with the host's name for 0.0.0.0)")
	fs.StringVar(&cfg.OnStop, "on-stop", env("DEN_ON_STOP", cfg.OnStop), "what a stop does to running and paused sandboxes: auto (hibernate them when the host is shutting down, as systemd says; leave them running on a restart), hibernate (always) or leave (never: they keep running for the next dend, and a reboot ends their processes). Not in a fleet, whose nodes are drained before a reboot")
	fs.StringVar(&cfg.RecoverLost, "recover-lost", env("DEN_RECOVER_LOST", "off"), "in a fleet: what the node that declares another lost does with its sandboxes that were uploaded: off (they wait in error for `den recover`), rollback (brought back on the fleet's nodes from their last upload, processes and all) or cold (from its files alone)")
	durations := []struct {
		v          *time.Duration
		name, help string
	}{
		{&cfg.StopGrace, "stop-grace", "time processes get between SIGTERM and SIGKILL on stop"},
		{&cfg.PauseAfter, "pause-after", "pause a sandbox unused this long (0: never); a sandbox's own policy overrides it"},
		{&cfg.HibernateAfter, "hibernate-after", "hibernate a sandbox unused this long (0: never)"},
		{&cfg.TTL, "ttl", "destroy a sandbox after this much running time (0: never)"},
		{&cfg.EphemeralTTL, "ephemeral-ttl", "TTL of an ephemeral sandbox created without one"},
		{&cfg.MinTTL, "min-ttl", "the shortest ttl, max_age, pause-after or hibernate-after a sandbox's own policy may set, so a slip cannot destroy work at once nor sleep after every call"},
		{&cfg.E2BMinTimeout, "e2b-min-timeout", "the shortest timeout E2B's API gives a sandbox (at least 1s); a shorter one is refused, saying so. E2B's timeouts are lifetimes asked for on purpose, so --min-ttl does not apply to them"},
		{&cfg.CheckpointMaxAge, "checkpoint-max-age", "remove manual checkpoints older than this (0: keep)"},
		{&cfg.IdleInterval, "idle-interval", "how often the idle policy runs"},
		{&cfg.ShutdownTimeout, "shutdown-timeout", "how long a stop may spend hibernating sandboxes (see --on-stop); those not hibernated by then are left as they are, and logged"},
		{&cfg.BootTimeout, "boot-timeout", "how long den-init may take to answer after a boot, wake or restore before the verb fails; raise it on a slow host (an emulated CPU)"},
		{&cfg.AuditRetention, "audit-retention", "remove audit log entries older than this, hourly (0: keep them all)"},
		{&cfg.NodeLease, "node-lease", "in a fleet: how long a heartbeat keeps this node's lease; other nodes declare it lost after (default 15s)"},
	}
	for _, d := range durations {
		def := *d.v
		if v := env("DEN_"+envName(d.name), ""); v != "" {
			parsed, err := time.ParseDuration(v)
			if err != nil {
				fatal(fmt.Errorf("DEN_%s: %w", envName(d.name), err))
			}
			def = parsed
		}
		fs.DurationVar(d.v, d.name, def, d.help)
	}
	fs.IntVar(&cfg.KeepCheckpoints, "keep-checkpoints", cfg.KeepCheckpoints, "manual checkpoints kept per sandbox, newest first (0: all)")
	fs.BoolVar(&cfg.BackgroundActive, "background-active", env("DEN_BACKGROUND_ACTIVE", "") != "", "detached commands still running count as use for the idle policy")
	fs.StringVar(&cfg.DebianMirror, "debian-mirror", env("DEN_DEBIAN_MIRROR", ""), "Debian mirror for the debian image (default: the host's apt mirror)")
	fs.StringVar(&cfg.ImageCache, "image-cache", env("DEN_IMAGE_CACHE", ""), "absolute path of the directory where the Debian packages image builds download, and the images they built, are kept for the next build (default DATA_DIR/cache/apt); dends may share one")
	fs.BoolVar(&cfg.Debug, "debug", env("DEN_DEBUG", "") != "", "debug logs, including runsc's per instance")
	fs.BoolVar(&cfg.NoCgroupPacer, "no-cgroup-pacer", env("DEN_NO_CGROUP_PACER", "") != "", "on a cgroup v1 host, let every boot, wake and fork wait for the RCU grace periods of runsc's cgroup moves instead of keeping the kernel's cgroup lock ready while runsc starts (see docs/install.md, Host tuning)")
	sizes := []struct {
		v          *int64
		name, help string
		text       string
	}{
		{v: &cfg.RunOutputMax, name: "run-output-max", help: "most bytes kept of each output stream of a run: its head and tail, the middle dropped (a run may ask for less)"},
		{v: &cfg.RunOutputAllowance, name: "run-output-allowance", help: "most bytes of run output kept per sandbox; its oldest ended runs' output is pruned for newer"},
		{v: &cfg.DataReserve, name: "data-reserve", help: "free space dend keeps on its data disk: past it, run output is dropped and new sandboxes and commands are refused (0: none)"},
		{v: &cfg.NodeMemory, name: "node-memory", help: "in a fleet: memory this node offers sandboxes' limits; placement and waking prefer nodes where limits fit in it (0: the host's memory)"},
		{v: &cfg.WarmReserve, name: "warm-reserve", help: "host memory warm pools leave available: under it they give instances back and do not refill (0: a tenth of the host's memory, at least 256MiB)"},
	}
	for i := range sizes {
		def := units.BytesSize(float64(*sizes[i].v))
		if *sizes[i].v == 0 {
			def = "0"
		}
		fs.StringVar(&sizes[i].text, sizes[i].name, env("DEN_"+envName(sizes[i].name), def), sizes[i].help)
	}
	parseDisk := diskFlags(fs, &cfg)
	parseQuotas := quotaFlags(fs, &cfg)
	parseStore := storeFlags(fs, &cfg)
	parseBlobs := blobsFlags(fs, &cfg, os.Getenv)
	parseMCP := mcpFlags(fs, &cfg)
	parseSSH := sshFlags(fs, &cfg)
	showVersion := fs.Bool("version", false, "print the version and exit")
	plainUsage(fs)
	fs.Parse(os.Args[1:])
	if *showVersion {
		fmt.Println("dend", version.Version)
		return
	}
	for _, m := range machine {
		if *m.v == "" {
			*m.v = m.def
		}
	}
	if cfg.RecoverLost == "off" {
		cfg.RecoverLost = ""
	}
	for _, sz := range sizes {
		n, err := parseSize(sz.text)
		if err != nil {
			fatal(fmt.Errorf("--%s: %w", sz.name, err))
		}
		*sz.v = n
	}
	n, err := sandbox.ParseMemory(pool)
	if err != nil {
		fatal(fmt.Errorf("--pool-size: %w", err))
	}
	cfg.PoolSize = n
	if err := parseDisk(); err != nil {
		fatal(err)
	}
	if err := parseQuotas(); err != nil {
		fatal(err)
	}
	if err := parseStore(); err != nil {
		fatal(err)
	}
	if err := parseBlobs(); err != nil {
		fatal(err)
	}
	if err := parseMCP(); err != nil {
		fatal(err)
	}
	if err := parseSSH(); err != nil {
		fatal(err)
	}

	level := slog.LevelInfo
	if cfg.Debug {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if cfg.ImportSQLite != "" {
		report, err := daemon.ImportSQLite(ctx, cfg, log)
		if err != nil {
			fatal(err)
		}
		fmt.Print(report)
		return
	}
	if err := daemon.Run(ctx, cfg, log); err != nil {
		if ctx.Err() != nil {
			// SIGTERM (systemctl stop, a power-off) while dend was
			// starting cuts the start short: a stop, not a failure, or
			// systemd would record the unit failed.
			log.Warn("dend stopped while starting", "err", err)
			return
		}
		fatal(err)
	}
}

// plainUsage quotes commands in fs's usage texts with ' rather than `:
// the flag package takes a back-quoted word for the flag's value
// placeholder (-warm den image warm IMAGE N), where the value's type is
// the right one.
func plainUsage(fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) { f.Usage = strings.ReplaceAll(f.Usage, "`", "'") })
}

// parseSize reads a size flag like 64M or 1G; 0 is zero.
func parseSize(v string) (int64, error) {
	if v == "0" {
		return 0, nil
	}
	n, err := units.RAMInBytes(v)
	if err != nil || n <= 0 {
		return 0, errdefs.WithHint(errdefs.Invalid("invalid size %q", v), "use a size like 64M or 1G, or 0")
	}
	return n, nil
}

// envName turns a flag name into its environment variable's suffix.
func envName(flag string) string { return strings.ToUpper(strings.ReplaceAll(flag, "-", "_")) }

func env(key, def string) string {
	if v, ok := os.LookupEnv(key); ok {
		return v
	}
	return def
}

func fatal(err error) {
	fmt.Fprintf(os.Stderr, "dend: %v\n", err)
	if h := errdefs.Hint(err); h != "" {
		fmt.Fprintf(os.Stderr, "hint: %s\n", h)
	}
	os.Exit(1)
}
