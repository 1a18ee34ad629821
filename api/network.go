package api

// Network modes.
const (
	NetworkNone  = "none"  // reaches nothing (the default)
	NetworkAllow = "allow" // reaches only what Allow names
	NetworkOpen  = "open"  // reaches the internet, never the denied ranges
)

// NetworkPolicy is what a sandbox may reach: the body of PUT
// /v1/sandboxes/{name}/network, and part of a create request and of a
// Sandbox. Whatever the mode and the rules, the host, dend, other
// sandboxes, loopback, link-local (metadata), multicast and reserved
// ranges are never reached; private ranges only where an admin opened
// them and a CIDR rule names them. A rule naming anything else of those
// is refused.
type NetworkPolicy struct {
	Mode string `json:"mode"` // none, allow or open
	// Allow lists rules: "198.51.100.0/24", "203.0.113.7:5432",
	// "pypi.org:443", "*.pythonhosted.org:80,443". A domain admits the
	// addresses den's resolver answered for it.
	Allow []string `json:"allow,omitempty"`
}
