package mcpserver

import (
	"context"
	"strconv"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

// PathInput names a path in a sandbox.
type PathInput struct {
	Name string `json:"name" jsonschema:"the sandbox's name"`
	Path string `json:"path" jsonschema:"absolute path inside the sandbox"`
}

// FileStat is file_stat's result.
type FileStat struct {
	Path    string            `json:"path"`
	Type    string            `json:"type" jsonschema:"file, dir, symlink or other"`
	Size    int64             `json:"size"`
	Mode    string            `json:"mode" jsonschema:"permission bits in octal"`
	ModTime time.Time         `json:"mod_time"`
	Target  string            `json:"target,omitempty" jsonschema:"a symlink's target"`
	UID     uint32            `json:"uid"`
	GID     uint32            `json:"gid"`
	Owner   string            `json:"owner,omitempty" jsonschema:"the owning user's name inside the sandbox"`
	Group   string            `json:"group,omitempty"`
	Xattrs  map[string]string `json:"xattrs,omitempty" jsonschema:"its user extended attributes (user.*)"`
}

// MkdirInput is file_mkdir's arguments.
type MkdirInput struct {
	Name    string `json:"name" jsonschema:"the sandbox's name"`
	Path    string `json:"path" jsonschema:"absolute path of the directory to make"`
	Parents bool   `json:"parents,omitempty" jsonschema:"make missing parent directories too, and accept one that exists (mkdir -p)"`
	Mode    string `json:"mode,omitempty" jsonschema:"permission bits in octal (default 755)"`
	User    string `json:"user,omitempty" jsonschema:"the user, uid or user:group that owns it (default root)"`
}

// MoveInput is file_move's arguments.
type MoveInput struct {
	Name string `json:"name" jsonschema:"the sandbox's name"`
	From string `json:"from" jsonschema:"absolute path of the file or directory to move"`
	To   string `json:"to" jsonschema:"its new absolute path; a file there is replaced"`
}

// RemoveInput is file_remove's arguments.
type RemoveInput struct {
	Name      string `json:"name" jsonschema:"the sandbox's name"`
	Path      string `json:"path" jsonschema:"absolute path of the file or directory to remove"`
	Recursive bool   `json:"recursive,omitempty" jsonschema:"remove a directory and everything in it (rm -r); without it only a file or an empty directory"`
}

// FileDone is the result of a tool that changed a path.
type FileDone struct {
	Path string `json:"path" jsonschema:"the path made, moved to or removed"`
}

// fileOpTools inspect and rearrange a sandbox's files.
func (s *server) fileOpTools(srv *mcp.Server) {
	add(s, srv, &mcp.Tool{
		Name:        "file_stat",
		Title:       "Describe a file",
		Description: "Show a file's or directory's type, size, permissions, owner, modification time and extended attributes.",
		Annotations: readOnly(),
	}, func(ctx context.Context, c *client.Client, _ *mcp.CallToolRequest, in PathInput) (FileStat, error) {
		fi, err := c.Stat(ctx, in.Name, in.Path)
		if err != nil {
			return FileStat{}, err
		}
		return FileStat{Path: in.Path, Type: fi.Type, Size: fi.Size, Mode: strconv.FormatUint(uint64(fi.Mode), 8), ModTime: fi.ModTime,
			Target: fi.Target, UID: fi.UID, GID: fi.GID, Owner: fi.Owner, Group: fi.Group, Xattrs: fi.Xattrs}, nil
	})

	add(s, srv, &mcp.Tool{
		Name:        "file_mkdir",
		Title:       "Make a directory",
		Description: "Make a directory in a sandbox; with parents, its missing parents too.",
		Annotations: changes(false, false),
	}, func(ctx context.Context, c *client.Client, _ *mcp.CallToolRequest, in MkdirInput) (FileDone, error) {
		mode, err := octalMode(in.Mode)
		if err != nil {
			return FileDone{}, err
		}
		if err := c.Mkdir(ctx, in.Name, api.MkdirRequest{Path: in.Path, Parents: in.Parents, Mode: uint32(mode), User: in.User}); err != nil {
			return FileDone{}, err
		}
		return FileDone{Path: in.Path}, nil
	})

	add(s, srv, &mcp.Tool{
		Name:        "file_move",
		Title:       "Move a file",
		Description: "Move or rename a file or directory in a sandbox. A file at the destination is replaced.",
		Annotations: changes(true, false),
	}, func(ctx context.Context, c *client.Client, _ *mcp.CallToolRequest, in MoveInput) (FileDone, error) {
		if err := c.Move(ctx, in.Name, in.From, in.To); err != nil {
			return FileDone{}, err
		}
		return FileDone{Path: in.To}, nil
	})

	add(s, srv, &mcp.Tool{
		Name:        "file_remove",
		Title:       "Remove a file",
		Description: "Remove a file or an empty directory from a sandbox; with recursive, a directory and everything in it.",
		Annotations: changes(true, true),
	}, func(ctx context.Context, c *client.Client, _ *mcp.CallToolRequest, in RemoveInput) (FileDone, error) {
		if err := c.RemoveFile(ctx, in.Name, in.Path, in.Recursive); err != nil {
			return FileDone{}, err
		}
		return FileDone{Path: in.Path}, nil
	})
}
