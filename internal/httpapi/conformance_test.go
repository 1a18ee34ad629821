package httpapi

import (
	"github.com/den-dev/den/internal/image"
	"github.com/den-dev/den/internal/sandbox"
)

// The real implementations serve the interfaces the handlers declare.
var (
	_ SandboxService = (*sandbox.Service)(nil)
	_ ImageService   = (*image.Manager)(nil)
)
