package main

import (
	"flag"
	"fmt"
	"strconv"
	"time"

	"github.com/den-dev/den/internal/daemon"
)

// mcpFlags declares the flags that bound /mcp's sessions; the returned
// func reads the environment's values that did not parse, after
// fs.Parse, as an error.
func mcpFlags(fs *flag.FlagSet, cfg *daemon.Config) func() error {
	var bad []error
	intFlag := func(v *int, name, help string) {
		def := *v
		if s := env("DEN_"+envName(name), ""); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil {
				bad = append(bad, fmt.Errorf("DEN_%s: %q is not a whole number", envName(name), s))
			}
			def = n
		}
		fs.IntVar(v, name, def, help)
	}
	intFlag(&cfg.MCP.PerCaller, "mcp-sessions-per-token", "MCP sessions one API token may hold open at /mcp; past it a new session gets 429 until one ends (DELETE /mcp) or goes idle")
	intFlag(&cfg.MCP.Total, "mcp-sessions", "MCP sessions all tokens together may hold open at /mcp (root on the unix socket has as many of its own)")
	def := cfg.MCP.IdleTimeout
	if s := env("DEN_MCP_IDLE_TIMEOUT", ""); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			bad = append(bad, fmt.Errorf("DEN_MCP_IDLE_TIMEOUT: %w", err))
		}
		def = d
	}
	fs.DurationVar(&cfg.MCP.IdleTimeout, "mcp-idle-timeout", def, "close an MCP session that has had no request for this long, freeing its place and memory")
	return func() error {
		if len(bad) > 0 {
			return bad[0]
		}
		return nil
	}
}
