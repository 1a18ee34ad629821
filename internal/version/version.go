// Package version carries den's build version, stamped at link time with
// -ldflags "-X github.com/den-dev/den/internal/version.Version=...".
package version

// Version is den's version; "dev" for unstamped builds.
var Version = "dev"
