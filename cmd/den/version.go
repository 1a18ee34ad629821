package main

import (
	"github.com/den-dev/den/cmd/den/internal/cli"

	"fmt"
	"runtime"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

func (a *app) versionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print den's version and dend's, warning when they differ",
		Example: `  den version
  den version --json`,
		Args: cli.Args(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.Client()
			if err != nil {
				return err
			}
			cv := map[string]string{"version": a.ClientVersion(), "go": runtime.Version()}
			h, err := c.Health(cmd.Context())
			mismatch := err == nil && h.Version != cv["version"]
			if err == nil {
				a.HeardServer(h.Version) // a dend of v0.1.0 names it only here
			}
			if a.JSON {
				if err != nil {
					return err
				}
				return cli.PrintJSON(a.Stdout, map[string]any{"client": cv, "server": h, "mismatch": mismatch})
			}
			fmt.Fprintf(a.Stdout, "den:   %s (%s)\n", cv["version"], cv["go"])
			if err != nil {
				return err
			}
			details := []string{"status " + h.Status}
			if h.RunscVersion != "" {
				details = append(details, "runsc "+h.RunscVersion)
			}
			if h.Storage != "" {
				details = append(details, "storage "+h.Storage)
			}
			fmt.Fprintf(a.Stdout, "dend:  %s (%s)\n", h.Version, strings.Join(details, ", "))
			switch b := h.Blobs; {
			case b == nil:
			case b.Reachable:
				fmt.Fprintln(a.Stdout, "blobs: reachable")
			default:
				since := ""
				if b.Since != nil {
					since = " for " + time.Since(*b.Since).Round(time.Second).String()
				}
				fmt.Fprintf(a.Stdout, "blobs: CANNOT BE REACHED%s: %s\n       uploads wait and retry; moves, downloads and recover --rollback answer 503 until it answers\n", since, b.Error)
			}
			return nil
		},
	}
}
