package main

import (
	"github.com/den-dev/den/cmd/den/internal/cli"

	"context"
	"errors"
	"io"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/den-dev/den/client"
	"github.com/den-dev/den/internal/mcpserver"
)

func (a *app) mcpCommand() *cobra.Command {
	var outputMax int
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Serve den's tools to an MCP client over stdio",
		Long: `Serve den's tools to an agent through the Model Context Protocol on stdin and
stdout, for MCP clients that start their servers as commands (Claude Desktop,
Claude Code, Cursor and the like). The tools act with this command's access to
dend: its unix socket as root, or --host/DEN_HOST with --token/DEN_TOKEN (an
owner token's agent sees only that owner's sandboxes). dend also serves the
same tools over streamable HTTP at /mcp on its listener.

Add it to a client's configuration as the command "den" with the argument
"mcp", and DEN_HOST and DEN_TOKEN in its environment when dend is remote.`,
		Example: `  den mcp
  DEN_HOST=http://10.0.0.5:7070 DEN_TOKEN=den_... den mcp
  claude mcp add den -- den mcp`,
		Args: cli.Args(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if outputMax < 1 {
				return cli.Usagef("give a positive number of bytes", "--output-max %d", outputMax)
			}
			c, err := a.Client()
			if err != nil {
				return err
			}
			srv := mcpserver.New(func(context.Context, *mcp.CallToolRequest) (*client.Client, error) { return c, nil },
				mcpserver.Options{OutputMax: outputMax})
			t := &mcp.IOTransport{Reader: io.NopCloser(a.Stdin), Writer: nopWriteCloser{a.Stdout}}
			err = srv.Run(cmd.Context(), t)
			if errors.Is(err, context.Canceled) || errors.Is(err, io.EOF) {
				return nil // the client closed stdin, or was interrupted
			}
			return err
		},
	}
	cmd.Flags().IntVar(&outputMax, "output-max", 64<<10, "the most of each output stream a tool returns, the tail kept")
	return cmd
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
