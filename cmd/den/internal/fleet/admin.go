package fleet

import (
	"fmt"

	"github.com/docker/go-units"
	"github.com/spf13/cobra"

	"github.com/den-dev/den/cmd/den/internal/cli"
)

func (a *app) adminCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "admin",
		Short: "Look after dend itself",
	}
	cmd.AddCommand(a.gcBlobsCommand())
	return cmd
}

func (a *app) gcBlobsCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "gc-blobs",
		Short: "Collect dend's blob store now",
		Long: `Collect dend's blob store (dend --blobs) now, as dend does every
--blobs-gc-interval: every manifest a checkpoint's record names is kept with
its chunks; the manifests no record names and the chunks only they used are
removed once older than --blobs-gc-grace, so an upload under way is never
collected. MISSING counts manifests a record names that the blob store lacks:
those checkpoints cannot be downloaded again. Admins only.`,
		Example: `  den admin gc-blobs
  den admin gc-blobs --json`,
		Args: cli.Args(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.Client()
			if err != nil {
				return err
			}
			st, err := c.CollectBlobs(cmd.Context())
			if err != nil {
				return err
			}
			if a.JSON {
				return cli.PrintJSON(a.Stdout, st)
			}
			t := cli.NewTable(a.Stdout, "", "KEPT", "REMOVED", "MISSING")
			t.Row("manifests", fmt.Sprint(st.Manifests), fmt.Sprint(st.ManifestsRemoved), fmt.Sprint(st.MissingManifests))
			t.Row("chunks", fmt.Sprint(st.Chunks), fmt.Sprint(st.ChunksRemoved), "-")
			if err := t.Flush(); err != nil {
				return err
			}
			_, err = fmt.Fprintf(a.Stdout, "freed %s\n", units.BytesSize(float64(st.BytesRemoved)))
			return err
		},
	}
}
