package daemon

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/den-dev/den/internal/cluster"
	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/fleet"
	"github.com/den-dev/den/internal/recovery"
	"github.com/den-dev/den/internal/sandbox"
	"github.com/den-dev/den/internal/version"
)

// fleetNode is this dend's part in a fleet: the forwarder of requests for
// other nodes' sandboxes, the peers sandboxes move to, and, once it
// joined, its membership (lease) and the fence that passes the lease on
// to its sandboxes.
type fleetNode struct {
	cfg       Config
	records   fleetStore
	log       *slog.Logger
	info      func(ctx context.Context) cluster.Info
	forwarder *cluster.Forwarder
	peers     *peers
	member    *cluster.Member
	fence     *fleet.Fence
	// node is what it does with the others for sandboxes; made with the
	// sandbox service (attach).
	node *fleet.Node
	// recovery recovers the sandboxes of a lost node brought back here
	// (recoverLost); set with node (attach).
	recovery *recovery.Service
	// portsKey signs URLs to exposed ports on every node alike, so a
	// link works through any of them: it comes from the fleet's key.
	portsKey []byte
}

// newFleet readies this dend to be node cfg.Node of the fleet fs
// records: the fleet's key, made by the first node, and what comes of it.
func newFleet(ctx context.Context, cfg Config, fs fleetStore, st sandbox.Store, runscVersion string, log *slog.Logger) (*fleetNode, error) {
	fresh := make([]byte, 32)
	rand.Read(fresh)
	key, err := fs.ClusterKey(ctx, fresh)
	if err != nil {
		return nil, err
	}
	// The fence logs as the sandbox service does.
	fence := fleet.NewFence(cfg.Node, log)
	log = log.With("component", "fleet")
	f := &fleetNode{cfg: cfg, records: fs, log: log, info: nodeInfo(cfg, st, runscVersion),
		forwarder: cluster.NewForwarder(cfg.Node, fs, key, log), fence: fence}
	f.peers = &peers{self: cfg.Node, nodes: fs, calls: f.forwarder, info: f.info}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte("den ports key v1"))
	f.portsKey = mac.Sum(nil)
	return f, nil
}

// attach makes this node's part in the fleet for sandboxes, from the
// sandbox service svc and the blob store blobs (nil: none).
func (f *fleetNode) attach(svc *sandbox.Service, st sandbox.Store, blobs *fleet.Blobs, recov *recovery.Service, log *slog.Logger) {
	f.node = fleet.New(fleet.Config{Service: svc, Store: st, Peers: f.peers, Blobs: blobs, Node: f.cfg.Node, Logger: log})
	// A recovery asked here of a lost node's sandbox takes it over.
	recov.UseTakeOver(f.node)
	f.recovery = recov
}

// join registers this dend in the fleet and starts keeping its lease.
// Losing the lease ends ctx's dend through stop.
func (f *fleetNode) join(ctx context.Context, svc *sandbox.Service, stop context.CancelCauseFunc) error {
	peer, err := f.cfg.PeerAddress()
	if err != nil {
		return err
	}
	if peer == "" {
		f.log.Warn("this node has no TCP listener: other nodes of the fleet cannot forward its sandboxes' requests to it; give --listen (and --peer-url)", "node", f.cfg.Node)
	}
	m, err := cluster.Join(ctx, cluster.MemberConfig{
		Registry: f.records, Logger: f.log,
		Self:  cluster.Node{Name: f.cfg.Node, PeerURL: peer},
		Lease: f.cfg.NodeLease,
		Info:  f.info,
		// Its sandboxes run only while it holds its lease.
		Renewed: f.fence.LeaseRenewed,
		// This node declared them lost: it records their sandboxes so.
		Expired: func(tick context.Context, lost []cluster.Node) {
			for _, n := range lost {
				back := f.node.NodeLost(tick, n.Name)
				if f.cfg.RecoverLost != "" && len(back) > 0 {
					go f.recoverLost(ctx, n.Name, back) // outlives the heartbeat's tick
				}
			}
		},
	})
	if err != nil {
		return err
	}
	f.member = m
	f.fence.Run(svc)
	go m.Run(ctx)
	go func() {
		select {
		case err := <-m.Lost():
			stop(err)
		case <-ctx.Done():
		}
	}()
	return nil
}

// PeerAddress is the URL other nodes reach this one at: PeerURL, or
// the TCP listener's address (the host's name when it listens on every
// address); "" without a TCP listener: other nodes cannot forward to it.
func (c *Config) PeerAddress() (string, error) {
	if c.PeerURL != "" {
		return c.PeerURL, nil
	}
	if c.Listen == "" {
		return "", nil
	}
	host, port, err := net.SplitHostPort(c.Listen)
	if err != nil {
		return "", errdefs.Invalid("config listen: %q: %v", c.Listen, err)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		if host, err = os.Hostname(); err != nil {
			return "", fmt.Errorf("naming this node's peer address: %w", err)
		}
	}
	return "http://" + net.JoinHostPort(host, port), nil
}

// validatePeerURL checks PeerURL: an http or https URL of a host, with no
// path.
func (c *Config) validatePeerURL() error {
	if c.PeerURL == "" {
		return nil
	}
	u, err := url.Parse(c.PeerURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.Trim(u.Path, "/") != "" || u.RawQuery != "" {
		return errdefs.WithHint(errdefs.Invalid("config peer-url: %q is not an http(s) URL of a host", c.PeerURL),
			"give the URL other nodes reach this dend's --listen at, e.g. http://10.0.0.5:7070")
	}
	return nil
}

// nodeInfo reports this node's resources at each heartbeat.
func nodeInfo(cfg Config, st sandbox.Store, runscVersion string) func(ctx context.Context) cluster.Info {
	features := cpuFeatures()
	host := hostLimits()
	return func(ctx context.Context) cluster.Info {
		info := cluster.Info{CPUs: host.CPUs, MemoryBytes: host.MemoryBytes, DenVersion: version.Version,
			RunscVersion: runscVersion, CPUFeatures: features}
		if cfg.NodeMemory > 0 {
			info.MemoryBytes = cfg.NodeMemory
		}
		var fs unix.Statfs_t
		if unix.Statfs(cfg.DataDir, &fs) == nil {
			info.DiskFreeBytes = int64(fs.Bavail) * fs.Bsize
		}
		if sbs, err := st.ListSandboxesOn(ctx, cfg.Node); err == nil {
			for _, sb := range sbs {
				if sb.State == sandbox.StateRunning || sb.State == sandbox.StatePaused {
					info.Sandboxes++
					info.CommittedMemoryBytes += sb.Spec.MemoryBytes
					info.CommittedCPUs += sb.Spec.CPUs
				}
			}
		}
		return info
	}
}

// cpuFeatures are the flags of the host's first CPU, sorted: a memory
// image restores only where the CPU offers what it was taken with.
func cpuFeatures() []string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == "flags" {
			flags := strings.Fields(v)
			slices.Sort(flags)
			return flags
		}
	}
	return nil
}
