package mcpserver

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

// Setup is what a rebase of a sandbox does: its image, the steps it runs
// again and the paths it carries over.
type Setup struct {
	Name  string   `json:"name"`
	Image string   `json:"image" jsonschema:"IMAGE@VERSION its files came from"`
	Newer bool     `json:"newer_image,omitempty" jsonschema:"a newer version of its image exists: sandbox_rebase moves it there"`
	Steps []string `json:"steps" jsonschema:"shell commands run in order after a rebase"`
	Keep  []string `json:"keep" jsonschema:"paths a rebase carries over from the old files"`
}

func setupOf(sb *api.Sandbox) Setup {
	return Setup{Name: sb.Name, Image: fmt.Sprintf("%s@%d", sb.Image, sb.ImageVersion), Newer: sb.ImageOutdated,
		Steps: orEmpty(sb.Setup), Keep: orEmpty(sb.Keep)}
}

func orEmpty(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
}

// SetupInput is sandbox_setup's arguments.
type SetupInput struct {
	Name  string    `json:"name" jsonschema:"the sandbox's name"`
	Steps *[]string `json:"steps,omitempty" jsonschema:"replace the setup steps: shell commands such as apt-get install -y git; [] clears them; left out they stay"`
	Keep  *[]string `json:"keep,omitempty" jsonschema:"replace the extra absolute paths a rebase keeps (/root, /home, /work and /srv always are); [] clears them; left out they stay"`
}

// RebaseInput is sandbox_rebase's arguments.
type RebaseInput struct {
	Name  string `json:"name" jsonschema:"the sandbox's name"`
	Image string `json:"image,omitempty" jsonschema:"IMAGE or IMAGE@VERSION to move to (default: the newest version of its own image)"`
}

// Rebased is what sandbox_rebase did.
type Rebased struct {
	Sandbox    Sandbox     `json:"sandbox"`
	Checkpoint string      `json:"checkpoint" jsonschema:"the checkpoint taken first: sandbox_restore it to undo the rebase"`
	From       string      `json:"from" jsonschema:"IMAGE@VERSION before"`
	To         string      `json:"to" jsonschema:"IMAGE@VERSION after"`
	Kept       []string    `json:"kept,omitempty" jsonschema:"the paths carried over"`
	Steps      []SetupStep `json:"steps,omitempty" jsonschema:"the setup steps that ran"`
	DurationMS int64       `json:"duration_ms"`
}

// SetupStep is a setup step a rebase ran.
type SetupStep struct {
	Command  string `json:"command"`
	RunID    string `json:"run_id" jsonschema:"run_output reads its output"`
	ExitCode int    `json:"exit_code"`
}

func (s *server) rebaseTools(srv *mcp.Server) {
	add(s, srv, &mcp.Tool{
		Name:        "sandbox_setup",
		Title:       "Set a sandbox's setup steps",
		Description: "Show or change a sandbox's setup steps and kept paths: what sandbox_rebase runs again and carries over. Nothing runs now; with only name it changes nothing.",
		Annotations: changes(false, true),
	}, func(ctx context.Context, c *client.Client, _ *mcp.CallToolRequest, in SetupInput) (Setup, error) {
		var sb *api.Sandbox
		var err error
		if in.Steps == nil && in.Keep == nil {
			sb, err = c.GetSandbox(ctx, in.Name)
		} else {
			sb, err = c.SetSetup(ctx, in.Name, api.SetupRequest{Steps: in.Steps, Keep: in.Keep})
		}
		if err != nil {
			return Setup{}, err
		}
		return setupOf(sb), nil
	})

	add(s, srv, &mcp.Tool{
		Name:  "sandbox_rebase",
		Title: "Rebase a sandbox on a newer image",
		Description: "Give a sandbox new files from an image (by default the newest version of its own), carrying its kept paths over and running its setup steps again. " +
			"Its processes restart. A checkpoint is taken first; a failed step rolls the sandbox back and the error names it.",
		Annotations: changes(true, false),
	}, func(ctx context.Context, c *client.Client, _ *mcp.CallToolRequest, in RebaseInput) (Rebased, error) {
		r, err := c.Rebase(ctx, in.Name, in.Image)
		if err != nil {
			return Rebased{}, err
		}
		out := Rebased{Sandbox: sandboxOf(&r.Sandbox), Checkpoint: r.Checkpoint, From: r.From, To: r.To, Kept: r.Kept, DurationMS: r.DurationMS}
		for _, st := range r.Steps {
			out.Steps = append(out.Steps, SetupStep{Command: st.Command, RunID: st.Run, ExitCode: st.ExitCode})
		}
		return out, nil
	})
}
