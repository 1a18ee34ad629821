// Package daemon wires dend together: storage pool, store, images, engine,
// network, the sandbox service and the API listeners. It holds no logic of
// its own beyond choosing implementations and starting and stopping them.
package daemon

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/den-dev/den/internal/cluster"
	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/idle"
	"github.com/den-dev/den/internal/mcpserver"
	"github.com/den-dev/den/internal/netns"
	"github.com/den-dev/den/internal/netpolicy"
	"github.com/den-dev/den/internal/quota"
	"github.com/den-dev/den/internal/runoutput"
	"github.com/den-dev/den/internal/sandbox"
	"github.com/den-dev/den/internal/sshgate"
)

// Storage drivers.
const (
	StorageAuto  = "auto"
	StorageBtrfs = "btrfs"
	StorageCopy  = "copy"
)

// Config is everything dend can be told. Defaults come from Default; flags
// and environment are merged into it in cmd/dend only.
type Config struct {
	DataDir   string // records, pool, run output, logs
	RunDir    string // engine state that must not survive a reboot
	Socket    string // unix socket for the local CLI (root only)
	Listen    string // optional TCP listener, e.g. 127.0.0.1:7070
	SSHListen string // optional SSH gateway listener, e.g. 127.0.0.1:2222
	// SSHLimits bound what one key's SSH connections hold in dend.
	SSHLimits sshgate.Limits
	// MetricsListen, when set, serves /metrics alone on this TCP address
	// without a token (for a Prometheus on a private network); /metrics
	// on Listen always needs an admin or admin:read token.
	MetricsListen string
	TokenFile     string        // admin bearer token for the TCP listener, from before API tokens; created if missing
	SecretsKey    string        // the secrets' encryption key file; default DATA_DIR/secrets.key
	Runsc         string        // pinned runsc binary
	Init          string        // den-init binary
	Storage       string        // auto, btrfs or copy
	Store         string        // PostgreSQL DSN (postgres://...) of the records; "" for SQLite in DataDir
	ImportSQLite  string        // with Store: a SQLite store to copy into it once, instead of serving
	PoolSize      int64         // size of the loop file made when the data dir is not on btrfs
	Subnet        string        // private range for sandbox links
	DNSUpstreams  string        // name servers den's resolver asks for allowed names, "ADDR[:PORT],..."; default: the host's
	AllowPrivate  string        // private ranges every owner's rules may name, "CIDR,..."; default: none
	StopGrace     time.Duration // SIGTERM→SIGKILL on stop
	BootTimeout   time.Duration // how long den-init may take to answer after a boot or restore
	// OnStop is what a stop does to the running and paused sandboxes:
	// OnStopAuto hibernates them when the host is shutting down (systemd
	// says so) and leaves them running otherwise (a restart), OnStopHibernate
	// always, OnStopLeave never.
	OnStop string
	// ShutdownTimeout bounds the hibernations of a stop; what is not
	// hibernated by then is left as it is, and logged.
	ShutdownTimeout time.Duration
	Node            string        // this host's name, and its node's in a fleet
	PeerURL         string        // in a fleet: where other nodes reach this one; default from Listen
	NodeLease       time.Duration // in a fleet: how long a heartbeat keeps this node's lease; 0: cluster.DefaultLease
	// RecoverLost is, in a fleet, how the node that declares another lost
	// brings that node's sandboxes back on the fleet's nodes: "rollback"
	// (their last uploaded checkpoint, processes and all), "cold" (its
	// files alone), or "" (they wait in error for `den recover`).
	RecoverLost string
	// NodeMemory is, in a fleet, the memory this node offers sandboxes'
	// limits, for placement; 0: the host's memory.
	NodeMemory int64
	Debug      bool // debug logs, and runsc debug logs per instance
	// NoCgroupPacer leaves runsc's cgroup v1 moves to wait for RCU grace
	// periods at every boot (see internal/runsc movepacer.go).
	NoCgroupPacer bool
	DebianMirror  string // mirror for the debian image; default: the host's apt mirror
	// ImageCache keeps the Debian packages image builds download, for the
	// next build; default DATA_DIR/cache/apt. Dends may share one.
	ImageCache  string
	PortsDomain string // serve exposed ports at PORT-NAME.PortsDomain too; "" for none
	// E2BDomain is where E2B's SDK finds sandboxes' hosts, PORT-ID.E2BDomain
	// (DOMAIN[:PORT]); "" for e2b.DefaultDomain.
	E2BDomain string
	// AuditRetention is how long audit log entries are kept; 0 keeps them.
	AuditRetention time.Duration
	// Run output dend keeps on the data disk (see runoutput.Limits).
	RunOutputMax       int64 // per stream of a run: head and tail
	RunOutputAllowance int64 // per sandbox, its runs together
	DataReserve        int64 // free space left on the data disk; 0: none
	// How sandboxes share the storage pool (see disk.go).
	DefaultDisk        int64   // cap of a sandbox that asks for none: AutoDisk, or 0 for none
	DiskOvercommit     float64 // caps together ≤ pool size × this; 0: unbounded
	DiskReserve        int64   // bytes of the pool kept for den's snapshots; with DiskReservePercent 0
	DiskReservePercent float64 // or this share of the pool, in percent
	// OwnerQuota is the quota of owners an admin set none for (quota.go).
	OwnerQuota quota.Quota
	// MaxPIDs is the highest process limit an owner may give a sandbox.
	MaxPIDs int

	// The idle policy sandboxes get unless they set their own; 0 is never.
	PauseAfter       time.Duration // pause after this long unused
	HibernateAfter   time.Duration // hibernate after this long unused
	TTL              time.Duration // destroy after this much running time
	EphemeralTTL     time.Duration // TTL of an ephemeral sandbox that sets none
	MinTTL           time.Duration // the shortest ttl, max_age, pause_after or hibernate_after a sandbox's own policy may set
	E2BMinTimeout    time.Duration // the shortest timeout E2B's API gives a sandbox
	BackgroundActive bool          // detached commands still running count as use
	KeepCheckpoints  int           // manual checkpoints kept per sandbox; 0 keeps all
	CheckpointMaxAge time.Duration // manual checkpoints older than this go; 0 keeps all
	IdleInterval     time.Duration // how often the idle policy is applied

	// Blobs is the blob store checkpoints are uploaded to; none by default.
	Blobs Blobs

	// Warm is how many instances of each image this node keeps booted
	// ahead of demand, "IMAGE=N,..." (see WarmDefaults); `den image warm`
	// overrides it per image.
	Warm string
	// WarmReserve is the host memory warm pools leave available: under
	// it they give instances back and do not refill; 0: a tenth of the
	// host's memory, at least 256 MiB.
	WarmReserve int64

	// MCP bounds the sessions of /mcp: per token, in all, and idle.
	MCP mcpserver.Limits
}

// Default returns the configuration dend runs with when told nothing.
func Default() Config {
	exe, _ := os.Executable()
	dir := filepath.Dir(exe)
	host, _ := os.Hostname()
	return Config{
		DataDir:   "/var/lib/den",
		RunDir:    "/run/den",
		Socket:    "/run/den/den.sock",
		Runsc:     filepath.Join(dir, "runsc"),
		Init:      filepath.Join(dir, "den-init"),
		Storage:   StorageAuto,
		PoolSize:  64 << 30,
		Subnet:    netns.DefaultPrefix,
		StopGrace: 5 * time.Second,
		Node:      host,
		SSHLimits: sshgate.DefaultLimits(),

		AuditRetention: 90 * 24 * time.Hour,
		OwnerQuota:     quota.Quota{Sandboxes: DefaultOwnerSandboxes, Checkpoints: DefaultOwnerCheckpoints},
		MaxPIDs:        DefaultMaxPIDs,

		DefaultDisk:        AutoDisk,
		DiskOvercommit:     2,
		DiskReservePercent: 10,

		RunOutputMax:       runoutput.DefaultPerStream,
		RunOutputAllowance: runoutput.DefaultPerSandbox,
		DataReserve:        1 << 30,

		PauseAfter:     10 * time.Minute,
		HibernateAfter: time.Hour,
		EphemeralTTL:   time.Hour,
		MinTTL:         time.Minute,
		E2BMinTimeout:  time.Second,
		IdleInterval:   time.Second,
		BootTimeout:    15 * time.Second,

		OnStop:          OnStopAuto,
		ShutdownTimeout: DefaultShutdownTimeout,

		Blobs: Blobs{Grace: DefaultBlobsGrace, GCInterval: DefaultBlobsGCInterval, Parallel: DefaultBlobsParallel},

		MCP: mcpserver.DefaultLimits(),
	}
}

// What a stop does to running and paused sandboxes (Config.OnStop).
const (
	OnStopAuto      = "auto"
	OnStopHibernate = "hibernate"
	OnStopLeave     = "leave"
)

// DefaultShutdownTimeout is how long a stop may spend hibernating
// sandboxes: under the unit's TimeoutStopSec (90s), so systemd never
// kills dend in the middle of one.
const DefaultShutdownTimeout = 60 * time.Second

// Validate names the first bad field.
func (c *Config) Validate() error {
	bad := func(field, format string, a ...any) error {
		return errdefs.Invalid("config %s: %s", field, fmt.Sprintf(format, a...))
	}
	for _, f := range []struct{ name, path string }{{"data-dir", c.DataDir}, {"run-dir", c.RunDir}, {"socket", c.Socket}} {
		if !filepath.IsAbs(f.path) {
			return bad(f.name, "%q is not an absolute path", f.path)
		}
	}
	if c.SecretsKey != "" && !filepath.IsAbs(c.SecretsKey) {
		return bad("secrets-key", "%q is not an absolute path", c.SecretsKey)
	}
	if c.ImageCache != "" && !filepath.IsAbs(c.ImageCache) {
		return bad("image-cache", "%q is not an absolute path", c.ImageCache)
	}
	switch c.Storage {
	case StorageAuto, StorageBtrfs, StorageCopy:
	default:
		return bad("storage", "%q is not one of auto, btrfs, copy", c.Storage)
	}
	if err := c.validateStore(); err != nil {
		return err
	}
	if err := c.Blobs.validate(); err != nil {
		return err
	}
	if !cluster.ValidName(c.Node) {
		return bad("node", "%q is not a node name: letters, digits, '.', '-' and '_', up to 63", c.Node)
	}
	if err := c.validatePeerURL(); err != nil {
		return err
	}
	if c.RecoverLost != "" && c.RecoverLost != sandbox.RecoverRollback && c.RecoverLost != sandbox.RecoverCold {
		return bad("recover-lost", "%q is not off, rollback or cold", c.RecoverLost)
	}
	if c.NodeMemory < 0 {
		return bad("node-memory", "%d is negative", c.NodeMemory)
	}
	if c.NodeLease != 0 && c.NodeLease < time.Second {
		return bad("node-lease", "%s is under the 1s minimum", c.NodeLease)
	}
	if c.PoolSize < 1<<30 {
		return bad("pool-size", "%d bytes is below the 1G minimum", c.PoolSize)
	}
	if err := c.validateDisk(); err != nil {
		return err
	}
	if _, err := netip.ParsePrefix(c.Subnet); err != nil {
		return bad("subnet", "%q is not a CIDR prefix", c.Subnet)
	}
	if _, err := c.Upstreams(); err != nil {
		return err
	}
	if _, err := c.OpenedPrivate(); err != nil {
		return err
	}
	if _, err := c.WarmDefaults(); err != nil {
		return err
	}
	if c.WarmReserve < 0 {
		return bad("warm-reserve", "negative size %d", c.WarmReserve)
	}
	if c.PortsDomain != "" && !validDomain(c.PortsDomain) {
		return bad("ports-domain", "%q is not a lowercase domain name like ports.example.com", c.PortsDomain)
	}
	if c.E2BDomain != "" {
		host, port, err := net.SplitHostPort(c.E2BDomain)
		if err != nil {
			host, port = c.E2BDomain, ""
		}
		if n, err := strconv.ParseUint(port, 10, 16); !validDomain(host) || (port != "" && (err != nil || n == 0)) {
			return bad("e2b-domain", "%q is not a lowercase domain name with an optional port, like sandboxes.example.com or e2b.localhost:7070", c.E2BDomain)
		}
		if host == c.PortsDomain {
			return bad("e2b-domain", "%q is also the ports domain: E2B's hosts name sandboxes by id, den's by name, so they need domains of their own", host)
		}
	}
	if c.Listen != "" {
		if _, err := netip.ParseAddrPort(c.Listen); err != nil {
			return bad("listen", "%q is not an address:port like 127.0.0.1:7070", c.Listen)
		}
	}
	if c.MetricsListen != "" {
		if _, _, err := net.SplitHostPort(c.MetricsListen); err != nil {
			return bad("metrics-listen", "%q is not an address:port like 127.0.0.1:9464 or :9464", c.MetricsListen)
		}
	}
	if c.SSHListen != "" {
		if _, _, err := net.SplitHostPort(c.SSHListen); err != nil {
			return bad("ssh-listen", "%q is not an address:port like 127.0.0.1:2222 or :2222", c.SSHListen)
		}
	}
	if err := c.SSHLimits.Validate(); err != nil {
		return bad("ssh limits", "%v", err)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"stop-grace", c.StopGrace}, {"pause-after", c.PauseAfter}, {"hibernate-after", c.HibernateAfter}, {"ttl", c.TTL}, {"ephemeral-ttl", c.EphemeralTTL}, {"min-ttl", c.MinTTL}, {"checkpoint-max-age", c.CheckpointMaxAge}, {"audit-retention", c.AuditRetention}} {
		if d.v < 0 {
			return bad(d.name, "negative duration %s", d.v)
		}
	}
	if c.IdleInterval <= 0 {
		return bad("idle-interval", "%s is not a positive duration", c.IdleInterval)
	}
	if c.BootTimeout <= 0 {
		return bad("boot-timeout", "%s is not a positive duration", c.BootTimeout)
	}
	if !slices.Contains([]string{OnStopAuto, OnStopHibernate, OnStopLeave}, c.OnStop) {
		return bad("on-stop", "%q is not auto, hibernate or leave", c.OnStop)
	}
	if c.ShutdownTimeout <= 0 {
		return bad("shutdown-timeout", "%s is not a positive duration", c.ShutdownTimeout)
	}
	if c.E2BMinTimeout < time.Second {
		return bad("e2b-min-timeout", "%s is under a second, the shortest E2B timeout den gives", c.E2BMinTimeout)
	}
	switch {
	case c.RunOutputMax < runoutput.MinPerStream:
		return bad("run-output-max", "%d bytes is below the %d minimum", c.RunOutputMax, runoutput.MinPerStream)
	case c.RunOutputAllowance < c.RunOutputMax:
		return bad("run-output-allowance", "%d bytes is below run-output-max (%d)", c.RunOutputAllowance, c.RunOutputMax)
	case c.DataReserve < 0:
		return bad("data-reserve", "negative size %d", c.DataReserve)
	}
	if err := c.validateQuotas(); err != nil {
		return err
	}
	if err := c.MCP.Validate(); err != nil {
		return fmt.Errorf("config %w", err)
	}
	if c.KeepCheckpoints < 0 {
		return bad("keep-checkpoints", "negative count %d", c.KeepCheckpoints)
	}
	for _, f := range []struct{ name, path string }{{"runsc", c.Runsc}, {"init", c.Init}} {
		if _, err := os.Stat(f.path); err != nil {
			return errdefs.WithHint(bad(f.name, "%s not found", f.path), "build everything with `make build` (or `make run`)")
		}
	}
	return nil
}

// SecretsKeyFile is where the key sealing secrets lives: SecretsKey, or
// secrets.key in the data directory.
func (c *Config) SecretsKeyFile() string {
	if c.SecretsKey != "" {
		return c.SecretsKey
	}
	return filepath.Join(c.DataDir, "secrets.key")
}

// ImageCacheDir is where image builds keep downloaded packages:
// ImageCache, or cache/apt in the data directory.
func (c *Config) ImageCacheDir() string {
	if c.ImageCache != "" {
		return c.ImageCache
	}
	return filepath.Join(c.DataDir, "cache", "apt")
}

// OutputLimits are the bounds on run output dend keeps.
func (c *Config) OutputLimits() runoutput.Limits {
	return runoutput.Limits{PerStream: c.RunOutputMax, PerSandbox: c.RunOutputAllowance, Reserve: c.DataReserve}
}

// Policy is the daemon-wide idle policy and retention.
func (c *Config) Policy() idle.Policy {
	return idle.Policy{
		PauseAfter: &c.PauseAfter, HibernateAfter: &c.HibernateAfter, TTL: &c.TTL,
		BackgroundActive: &c.BackgroundActive, KeepLast: &c.KeepCheckpoints, MaxAge: &c.CheckpointMaxAge,
	}
}

// Upstreams parses DNSUpstreams; none means the host's name servers.
func (c *Config) Upstreams() ([]netip.AddrPort, error) {
	var out []netip.AddrPort
	for _, f := range strings.Split(c.DNSUpstreams, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		ap, err := netip.ParseAddrPort(f)
		if err != nil {
			a, aerr := netip.ParseAddr(f)
			if aerr != nil {
				return nil, errdefs.Invalid("config dns-upstream: %q is not an address or address:port like 192.0.2.53 or 127.0.0.1:5353", f)
			}
			ap = netip.AddrPortFrom(a, 53)
		}
		out = append(out, ap)
	}
	return out, nil
}

// OpenedPrivate parses AllowPrivate: private ranges (RFC 1918, CGNAT)
// that every owner's network rules may name.
func (c *Config) OpenedPrivate() ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(c.AllowPrivate, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		p, err := netpolicy.ParsePrivateRange(f)
		if err != nil {
			return nil, fmt.Errorf("config allow-private: %w", err)
		}
		out = append(out, p)
	}
	return out, nil
}
