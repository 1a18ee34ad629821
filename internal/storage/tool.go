package storage

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"strings"

	"github.com/den-dev/den/internal/errdefs"
)

// RunTool runs the host program name with stdin and stdout as given, as
// the drivers run btrfs and tar to move volumes. A failure says which
// program and verb, with the last line it wrote to its error output (the
// one that says why); a missing program says how to install it.
func RunTool(ctx context.Context, name, install string, stdin io.Reader, stdout io.Writer, args ...string) error {
	bin, err := exec.LookPath(name)
	if err != nil {
		return errdefs.WithHint(errdefs.Unavailable("the %s program was not found", name), install)
	}
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		msg := strings.TrimSpace(stderr.String())
		if i := strings.LastIndexByte(msg, '\n'); i >= 0 {
			msg = msg[i+1:]
		}
		verb := name
		if len(args) > 0 {
			verb += " " + args[0]
		}
		return fmt.Errorf("%s: %w: %s", verb, err, msg)
	}
	return nil
}
