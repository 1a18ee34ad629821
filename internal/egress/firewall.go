package egress

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/netpolicy"
)

// Firewall is den's nftables table. Its base chains send every packet
// that arrives on a sandbox's link to that sandbox's own chains, found by
// link name in two verdict maps; other packets pass through untouched, so
// other tables (and other dends, each with its own table) are unaffected:
//
//	table inet NAME {
//	  set never { type ipv4_addr; flags interval }    # Denied.Never
//	  set private { type ipv4_addr; flags interval }  # Denied.Private
//	  set links { type ifname }                       # every sandbox link
//	  map forward-links { type ifname : verdict }     # link : jump fwd-ID
//	  map input-links { type ifname : verdict }       # link : jump in-ID
//	  chain forward { type filter hook forward priority filter
//	    oifname @links ct direction reply accept      # answers to a sandbox
//	    oifname @links drop                           # nobody else gets in
//	    iifname vmap @forward-links }
//	  chain input { type filter hook input priority filter
//	    iifname vmap @input-links }
//	  chain postrouting { type nat hook postrouting priority srcnat
//	    ip saddr SANDBOXES ip daddr != SANDBOXES masquerade }
//	  chain fwd-ID { ... }      # what sandbox ID reaches through the host
//	  chain in-ID { ... }       # what it reaches on the host itself: DNS
//	  set dom-ID-HASH { type ipv4_addr; flags timeout }  # per domain rule
//	}
//
// Ingress to a sandbox is decided before any sandbox's own chain, so no
// rule of one sandbox opens another: only answers to connections the
// sandbox made, or that the host made to it (den-init's channel, the port
// proxy), reach it. A sandbox's chains decide every packet it sends, not
// only the first of a connection, so a policy change holds at once for
// connections already open too. All state lives in the table: a
// restarted dend finds it as it was and only needs to tell its Resolver
// the policies again.
type Firewall struct {
	table     *nftables.Table
	sandboxes netip.Prefix
	resolver  netip.Addr
	denied    Denied

	// mu serializes transactions, so that Admit never races Apply or
	// Remove changing the same sandbox's sets.
	mu sync.Mutex
	// admitted remembers what Admit let each sandbox reach, by sandbox id
	// and domain set, with when it lapses: the table keeps it, but a
	// table something else removed comes back without it (Readmit).
	admitted map[string]map[string]map[netip.Addr]time.Time
}

// FirewallConfig says which table a Firewall owns and what it protects.
type FirewallConfig struct {
	// Table is the name of the nftables table (family inet) den owns;
	// nothing else may use it.
	Table string
	// Sandboxes is the range every sandbox address is in.
	Sandboxes netip.Prefix
	// Resolver is the address of den's Resolver: the one place on the
	// host sandboxes may send DNS to.
	Resolver netip.Addr
}

// Names in the table.
const (
	setNever     = "never"
	setPrivate   = "private"
	setLinks     = "links"
	mapForward   = "forward-links"
	mapInput     = "input-links"
	chainForward = "forward"
	chainInput   = "input"
	chainNAT     = "postrouting"
)

func forwardChain(id string) string { return "fwd-" + id }
func inputChain(id string) string   { return "in-" + id }

// domainSetPrefix starts the names of a sandbox's domain sets; a hash of
// the domain follows, as a domain can be longer than a set name.
func domainSetPrefix(id string) string { return "dom-" + id + "-" }

func domainSet(id, domain string) string {
	h := fnv.New64a()
	h.Write([]byte(domain))
	return domainSetPrefix(id) + hex.EncodeToString(h.Sum(nil))
}

// isDomainSetOf reports whether set name is one of sandbox id's domain sets.
func isDomainSetOf(name, id string) bool {
	rest, ok := strings.CutPrefix(name, domainSetPrefix(id))
	return ok && len(rest) == 16
}

// NewFirewall checks cfg; it changes nothing on the host until Setup.
func NewFirewall(cfg FirewallConfig) (*Firewall, error) {
	if cfg.Table == "" || len(cfg.Table) > 64 {
		return nil, fmt.Errorf("firewall table name %q: want 1 to 64 characters", cfg.Table)
	}
	if !cfg.Sandboxes.IsValid() || !cfg.Sandboxes.Addr().Is4() {
		return nil, fmt.Errorf("firewall sandbox range %s: want an IPv4 prefix", cfg.Sandboxes)
	}
	if !cfg.Resolver.Is4() {
		return nil, fmt.Errorf("firewall resolver address %s: want an IPv4 address", cfg.Resolver)
	}
	return &Firewall{
		table:     &nftables.Table{Name: cfg.Table, Family: nftables.TableFamilyINet},
		sandboxes: cfg.Sandboxes.Masked(),
		resolver:  cfg.Resolver,
		denied:    DeniedFor(cfg.Sandboxes),
		admitted:  map[string]map[string]map[netip.Addr]time.Time{},
	}, nil
}

// Denied is what sandboxes do not reach.
func (f *Firewall) Denied() Denied { return f.denied }

// Table is the name of the nftables table.
func (f *Firewall) Table() string { return f.table.Name }

// Setup creates the table, its base chains, maps and the denied sets, or
// brings them back to what they should be; sandbox chains are kept. It
// is one transaction, safe to repeat.
func (f *Firewall) Setup() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := newConn()
	c.AddTable(f.table)

	for name, ranges := range map[string][]netip.Prefix{setNever: f.denied.Never, setPrivate: f.denied.Private} {
		set := &nftables.Set{Table: f.table, Name: name, KeyType: nftables.TypeIPAddr, Interval: true}
		if err := c.AddSet(set, nil); err != nil {
			return fmt.Errorf("declaring the %s set: %w", name, err)
		}
		c.FlushSet(set)
		if err := c.SetAddElements(set, intervals(ranges)); err != nil {
			return fmt.Errorf("filling the %s set: %w", name, err)
		}
	}
	// Interface names are strings, in host byte order for nft to show them.
	links := &nftables.Set{Table: f.table, Name: setLinks, KeyType: nftables.TypeIFName, KeyByteOrder: binaryutil.NativeEndian}
	fwd := &nftables.Set{Table: f.table, Name: mapForward, IsMap: true, KeyType: nftables.TypeIFName, KeyByteOrder: binaryutil.NativeEndian, DataType: nftables.TypeVerdict}
	in := &nftables.Set{Table: f.table, Name: mapInput, IsMap: true, KeyType: nftables.TypeIFName, KeyByteOrder: binaryutil.NativeEndian, DataType: nftables.TypeVerdict}
	for _, s := range []*nftables.Set{links, fwd, in} {
		if err := c.AddSet(s, nil); err != nil {
			return fmt.Errorf("declaring set %s: %w", s.Name, err)
		}
	}

	accept := nftables.ChainPolicyAccept
	forward := c.AddChain(&nftables.Chain{Name: chainForward, Table: f.table, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookForward, Priority: nftables.ChainPriorityFilter, Policy: &accept})
	input := c.AddChain(&nftables.Chain{Name: chainInput, Table: f.table, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookInput, Priority: nftables.ChainPriorityFilter, Policy: &accept})
	nat := c.AddChain(&nftables.Chain{Name: chainNAT, Table: f.table, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookPostrouting, Priority: nftables.ChainPriorityNATSource, Policy: &accept})
	for _, ch := range []*nftables.Chain{forward, input, nat} {
		c.FlushChain(ch)
	}
	rule := func(ch *nftables.Chain, e ...expr.Any) {
		c.AddRule(&nftables.Rule{Table: f.table, Chain: ch, Exprs: e})
	}

	// Into a sandbox first: a sandbox's own chain must never decide what
	// enters another (an accept there would end the base chain).
	rule(forward, cat(oifIn(links), ctReply(), verdict(expr.VerdictAccept))...)
	rule(forward, cat(oifIn(links), counter(), verdict(expr.VerdictDrop))...)
	rule(forward, &expr.Meta{Key: expr.MetaKeyIIFNAME, Register: 1},
		&expr.Lookup{SourceRegister: 1, SetName: fwd.Name, SetID: fwd.ID, IsDestRegSet: true, DestRegister: 0})
	rule(input, &expr.Meta{Key: expr.MetaKeyIIFNAME, Register: 1},
		&expr.Lookup{SourceRegister: 1, SetName: in.Name, SetID: in.ID, IsDestRegSet: true, DestRegister: 0})
	rule(nat, cat(addrIn(offSaddr, f.sandboxes, expr.CmpOpEq), addrIn(offDaddr, f.sandboxes, expr.CmpOpNeq),
		[]expr.Any{&expr.Masq{}})...)

	if err := c.Flush(); err != nil {
		return fmt.Errorf("setting up nftables table %s: %w", f.table.Name, err)
	}
	return nil
}

// Apply makes p what sandbox sb reaches, in one transaction: its chains
// are rewritten, its domain sets kept for the domains p still names (so
// what it resolved stays reachable) and removed for the others, and its
// link is put in the maps. Setup must have run.
func (f *Firewall) Apply(sb Sandbox, p netpolicy.Policy) error {
	if !sb.Guest.Is4() || sb.Link == "" || sb.ID == "" {
		return fmt.Errorf("applying a network policy to %+v: incomplete sandbox", sb)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	existing, err := f.domainSets(sb.ID)
	if err != nil {
		return err
	}
	c := newConn()
	fwd := c.AddChain(&nftables.Chain{Name: forwardChain(sb.ID), Table: f.table})
	in := c.AddChain(&nftables.Chain{Name: inputChain(sb.ID), Table: f.table})
	c.FlushChain(fwd)
	c.FlushChain(in)

	// The sets the rules look up must exist first.
	wanted := map[string]bool{}
	if p.Mode == netpolicy.ModeAllow {
		for _, r := range p.Allow {
			if r.Domain == "" {
				continue
			}
			name := domainSet(sb.ID, r.Domain)
			if wanted[name] {
				continue
			}
			wanted[name] = true
			s := &nftables.Set{Table: f.table, Name: name, KeyType: nftables.TypeIPAddr, HasTimeout: true, Comment: r.Domain}
			if err := c.AddSet(s, nil); err != nil {
				return fmt.Errorf("declaring the set of %s: %w", r.Domain, err)
			}
		}
	}
	for _, e := range f.forwardRules(c, sb, p) {
		c.AddRule(&nftables.Rule{Table: f.table, Chain: fwd, Exprs: e})
	}
	for _, e := range f.inputRules(c, sb) {
		c.AddRule(&nftables.Rule{Table: f.table, Chain: in, Exprs: e})
	}
	for _, name := range existing {
		if !wanted[name] {
			c.DelSet(&nftables.Set{Table: f.table, Name: name})
		}
	}

	key := ifname(sb.Link)
	if err := errors.Join(
		c.SetAddElements(&nftables.Set{Table: f.table, Name: setLinks, KeyType: nftables.TypeIFName}, []nftables.SetElement{{Key: key}}),
		c.SetAddElements(&nftables.Set{Table: f.table, Name: mapForward, IsMap: true},
			[]nftables.SetElement{{Key: key, VerdictData: &expr.Verdict{Kind: expr.VerdictJump, Chain: fwd.Name}}}),
		c.SetAddElements(&nftables.Set{Table: f.table, Name: mapInput, IsMap: true},
			[]nftables.SetElement{{Key: key, VerdictData: &expr.Verdict{Kind: expr.VerdictJump, Chain: in.Name}}}),
	); err != nil {
		return fmt.Errorf("mapping link %s: %w", sb.Link, err)
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("applying the network policy of sandbox %s: %w", sb.ID, err)
	}
	for name := range f.admitted[sb.ID] {
		if !wanted[name] {
			delete(f.admitted[sb.ID], name)
		}
	}
	return nil
}

// forwardRules decide what sb sends through the host: nothing but IPv4
// from its own address; answers to connections made to it; never the
// Never ranges, whatever its rules say; then its CIDR rules; never the
// private ranges they did not name; then what its Resolver admitted for
// its domain rules; then everything under mode open.
func (f *Firewall) forwardRules(c *nftables.Conn, sb Sandbox, p netpolicy.Policy) [][]expr.Any {
	rules := f.commonRules(sb)
	rules = append(rules, cat(ipv4Daddr(), lookup(setNever, 0), counter(), verdict(expr.VerdictDrop)))
	rules = append(rules, f.cidrRules(c, p)...)
	rules = append(rules, cat(ipv4Daddr(), lookup(setPrivate, 0), counter(), verdict(expr.VerdictDrop)))
	switch p.Mode {
	case netpolicy.ModeAllow:
		for _, r := range p.Allow {
			if r.Domain != "" {
				rules = append(rules, cat(ipv4Daddr(), lookup(domainSet(sb.ID, r.Domain), 0), f.ports(c, r.Ports), verdict(expr.VerdictAccept)))
			}
		}
	case netpolicy.ModeOpen:
		rules = append(rules, verdict(expr.VerdictAccept))
	}
	return append(rules, cat(counter(), verdict(expr.VerdictDrop)))
}

// inputRules decide what sb sends to the host itself, at any of its
// addresses: DNS to the Resolver (which under mode none refuses every
// name at once, so programs fail fast rather than wait), and nothing
// else, whatever its rules say.
func (f *Firewall) inputRules(c *nftables.Conn, sb Sandbox) [][]expr.Any {
	rules := f.commonRules(sb)
	rules = append(rules, cat(addrIn(offDaddr, netip.PrefixFrom(f.resolver, 32), expr.CmpOpEq), f.ports(c, []uint16{53}), verdict(expr.VerdictAccept)))
	return append(rules, cat(counter(), verdict(expr.VerdictDrop)))
}

// commonRules start both chains: IPv6 and spoofed sources are dropped,
// and answers to connections made to the sandbox (by den-init's host
// side or the port proxy) go through.
func (f *Firewall) commonRules(sb Sandbox) [][]expr.Any {
	return [][]expr.Any{
		cat([]expr.Any{&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
			&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: []byte{unix.NFPROTO_IPV4}}}, counter(), verdict(expr.VerdictDrop)),
		cat(addrIn(offSaddr, netip.PrefixFrom(sb.Guest, 32), expr.CmpOpNeq), counter(), verdict(expr.VerdictDrop)),
		cat(ctReply(), verdict(expr.VerdictAccept)),
	}
}

func (f *Firewall) cidrRules(c *nftables.Conn, p netpolicy.Policy) [][]expr.Any {
	var rules [][]expr.Any
	for _, r := range p.Allow {
		if r.Prefix.IsValid() {
			rules = append(rules, cat(addrIn(offDaddr, r.Prefix, expr.CmpOpEq), f.ports(c, r.Ports), verdict(expr.VerdictAccept)))
		}
	}
	return rules
}

// ports matches TCP and UDP to the given ports, or anything when there
// are none. Each call declares its own anonymous sets in c's batch.
func (f *Firewall) ports(c *nftables.Conn, ports []uint16) []expr.Any {
	if len(ports) == 0 {
		return nil
	}
	protos := &nftables.Set{Table: f.table, Anonymous: true, Constant: true, KeyType: nftables.TypeInetProto}
	c.AddSet(protos, []nftables.SetElement{{Key: []byte{unix.IPPROTO_TCP}}, {Key: []byte{unix.IPPROTO_UDP}}})
	set := &nftables.Set{Table: f.table, Anonymous: true, Constant: true, KeyType: nftables.TypeInetService}
	var elems []nftables.SetElement
	for _, p := range ports {
		elems = append(elems, nftables.SetElement{Key: binary.BigEndian.AppendUint16(nil, p)})
	}
	c.AddSet(set, elems)
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Lookup{SourceRegister: 1, SetName: protos.Name, SetID: protos.ID},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Lookup{SourceRegister: 1, SetName: set.Name, SetID: set.ID},
	}
}

// Admit lets sandbox id reach addrs, resolved for domain, for timeout:
// they go into the domain's set, with their timeout renewed if they were
// there. It fails if the policy no longer names domain.
func (f *Firewall) Admit(id, domain string, addrs []netip.Addr, timeout time.Duration) error {
	if len(addrs) == 0 {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	set := &nftables.Set{Table: f.table, Name: domainSet(id, domain), KeyType: nftables.TypeIPAddr, HasTimeout: true}
	var plain, timed []nftables.SetElement
	for _, a := range addrs {
		k := a.AsSlice()
		plain = append(plain, nftables.SetElement{Key: k})
		timed = append(timed, nftables.SetElement{Key: k, Timeout: timeout})
	}
	// Adding an element that is there leaves its timeout alone on older
	// kernels: add (so it is there), delete and add again, atomically.
	c := newConn()
	if err := errors.Join(c.SetAddElements(set, plain), c.SetDeleteElements(set, plain), c.SetAddElements(set, timed)); err != nil {
		return err
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("admitting addresses of %s for sandbox %s: %w", domain, id, err)
	}
	sets := f.admitted[id]
	if sets == nil {
		sets = map[string]map[netip.Addr]time.Time{}
		f.admitted[id] = sets
	}
	if sets[set.Name] == nil {
		sets[set.Name] = map[netip.Addr]time.Time{}
	}
	now := time.Now()
	for a, until := range sets[set.Name] {
		if !until.After(now) {
			delete(sets[set.Name], a)
		}
	}
	for _, a := range addrs {
		sets[set.Name][a] = now.Add(timeout)
	}
	return nil
}

// Readmit puts back in sandbox id's domain sets what Admit let it reach
// that has not lapsed, each with the time it has left: after the table
// was removed by something else and set up again (Setup, Apply).
func (f *Firewall) Readmit(id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now()
	c := newConn()
	n := 0
	for name, addrs := range f.admitted[id] {
		var elems []nftables.SetElement
		for a, until := range addrs {
			left := until.Sub(now).Truncate(time.Second)
			if left < time.Second {
				delete(addrs, a)
				continue
			}
			elems = append(elems, nftables.SetElement{Key: a.AsSlice(), Timeout: left})
		}
		if len(elems) == 0 {
			continue
		}
		set := &nftables.Set{Table: f.table, Name: name, KeyType: nftables.TypeIPAddr, HasTimeout: true}
		if err := c.SetAddElements(set, elems); err != nil {
			return err
		}
		n += len(elems)
	}
	if n == 0 {
		return nil
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("admitting again what sandbox %s had resolved: %w", id, err)
	}
	return nil
}

// Remove deletes everything of sandbox id, whose link is link: map
// entries, chains and sets. What is not there is skipped.
func (f *Firewall) Remove(id, link string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := newConn()
	chains, err := c.ListChainsOfTableFamily(nftables.TableFamilyINet)
	if err != nil {
		return fmt.Errorf("listing nftables chains: %w", err)
	}
	var have []string
	for _, ch := range chains {
		if ch.Table.Name == f.table.Name {
			have = append(have, ch.Name)
		}
	}
	if len(have) == 0 {
		delete(f.admitted, id)
		return nil // no table
	}
	key := ifname(link)
	var mapped []*nftables.Set
	for _, name := range []string{setLinks, mapForward, mapInput} {
		s := &nftables.Set{Table: f.table, Name: name, IsMap: name != setLinks}
		elems, err := c.GetSetElements(s)
		if err != nil {
			return fmt.Errorf("listing set %s: %w", name, err)
		}
		if slices.ContainsFunc(elems, func(e nftables.SetElement) bool { return string(e.Key) == string(key) }) {
			mapped = append(mapped, s)
		}
	}
	sets, err := f.domainSetsLocked(c, id)
	if err != nil {
		return err
	}
	// Unmap first, then empty and delete the chains, then the sets
	// their rules looked up: one transaction.
	for _, s := range mapped {
		if err := c.SetDeleteElements(s, []nftables.SetElement{{Key: key}}); err != nil {
			return err
		}
	}
	for _, name := range []string{forwardChain(id), inputChain(id)} {
		if slices.Contains(have, name) {
			ch := &nftables.Chain{Name: name, Table: f.table}
			c.FlushChain(ch)
			c.DelChain(ch)
		}
	}
	for _, name := range sets {
		c.DelSet(&nftables.Set{Table: f.table, Name: name})
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("removing the network policy of sandbox %s: %w", id, err)
	}
	delete(f.admitted, id)
	return nil
}

// Links returns the sandbox links the table holds, or none if there is
// no table.
func (f *Firewall) Links() ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := newConn()
	elems, err := c.GetSetElements(&nftables.Set{Table: f.table, Name: setLinks})
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing sandbox links: %w", err)
	}
	var links []string
	for _, e := range elems {
		links = append(links, strings.TrimRight(string(e.Key), "\x00"))
	}
	return links, nil
}

// Sandboxes returns the ids of the sandboxes the table has chains of,
// or none if there is no table.
func (f *Firewall) Sandboxes() ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	chains, err := newConn().ListChainsOfTableFamily(nftables.TableFamilyINet)
	if err != nil {
		return nil, fmt.Errorf("listing nftables chains: %w", err)
	}
	seen := map[string]bool{}
	var ids []string
	for _, ch := range chains {
		if ch.Table.Name != f.table.Name {
			continue
		}
		id, ok := strings.CutPrefix(ch.Name, forwardChain(""))
		if !ok {
			id, ok = strings.CutPrefix(ch.Name, inputChain(""))
		}
		if ok && id != "" && !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// Present reports whether the table is there.
func (f *Firewall) Present() (bool, error) {
	c := newConn()
	if _, err := c.ListTableOfFamily(f.table.Name, f.table.Family); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return false, nil
		}
		return false, fmt.Errorf("finding nftables table %s: %w", f.table.Name, err)
	}
	return true, nil
}

// Teardown deletes the table, if there is one.
func (f *Firewall) Teardown() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := newConn()
	if _, err := c.ListTableOfFamily(f.table.Name, f.table.Family); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("finding nftables table %s: %w", f.table.Name, err)
	}
	c.DelTable(f.table)
	if err := c.Flush(); err != nil {
		return fmt.Errorf("removing nftables table %s: %w", f.table.Name, err)
	}
	return nil
}

func (f *Firewall) domainSets(id string) ([]string, error) {
	return f.domainSetsLocked(newConn(), id)
}

func (f *Firewall) domainSetsLocked(c *nftables.Conn, id string) ([]string, error) {
	sets, err := c.GetSets(f.table)
	if errors.Is(err, os.ErrNotExist) {
		return nil, errdefs.Unavailable("nftables table %s is missing", f.table.Name)
	}
	if err != nil {
		return nil, fmt.Errorf("listing nftables sets: %w", err)
	}
	var names []string
	for _, s := range sets {
		if isDomainSetOf(s.Name, id) {
			names = append(names, s.Name)
		}
	}
	return names, nil
}

// newConn is a connection for one nftables transaction, with socket
// buffers big enough for a large one (a policy of a few hundred rules):
// with the defaults the batch is refused as too long, or the kernel's
// acknowledgements overflow the receive buffer (ENOBUFS). dend runs as
// root, so the sizes are forced past the host's rmem_max and wmem_max.
func newConn() *nftables.Conn {
	c, err := nftables.New(nftables.WithSockOptions(func(nc *netlink.Conn) error {
		raw, err := nc.SyscallConn()
		if err != nil {
			return err
		}
		var serr error
		err = raw.Control(func(fd uintptr) {
			for _, opt := range []int{unix.SO_SNDBUFFORCE, unix.SO_RCVBUFFORCE} {
				if e := unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, opt, nftBufferBytes); e != nil && serr == nil {
					serr = e
				}
			}
		})
		return errors.Join(err, serr)
	}))
	if err != nil {
		return &nftables.Conn{} // New fails only on a lasting connection
	}
	return c
}

// nftBufferBytes sizes the socket buffers of nftables transactions.
const nftBufferBytes = 16 << 20
