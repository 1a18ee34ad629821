package mcpserver

import (
	"context"
	"encoding/base64"
	"io"
	"io/fs"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/den-dev/den/client"
)

// ReadInput is file_read's arguments.
type ReadInput struct {
	Name     string `json:"name" jsonschema:"the sandbox's name"`
	Path     string `json:"path" jsonschema:"absolute path of the file inside the sandbox"`
	MaxBytes int    `json:"max_bytes,omitempty" jsonschema:"read at most this many bytes (default and most 1 MiB)"`
}

// FileContent is file_read's result.
type FileContent struct {
	Path      string `json:"path"`
	Content   string `json:"content"`
	Encoding  string `json:"encoding" jsonschema:"utf-8, or base64 when the file is not text"`
	Size      int64  `json:"size"`
	Truncated bool   `json:"truncated,omitempty" jsonschema:"only the first max_bytes are here"`
}

// WriteInput is file_write's arguments.
type WriteInput struct {
	Name     string `json:"name" jsonschema:"the sandbox's name"`
	Path     string `json:"path" jsonschema:"absolute path of the file inside the sandbox; its directory must exist (file_mkdir makes one)"`
	Content  string `json:"content"`
	Encoding string `json:"encoding,omitempty" jsonschema:"utf-8 (default) or base64"`
	Mode     string `json:"mode,omitempty" jsonschema:"permission bits in octal such as 755 (default 644 for a new file)"`
}

// Written is file_write's result.
type Written struct {
	Path  string `json:"path"`
	Bytes int    `json:"bytes"`
}

// ListInput is file_list's arguments.
type ListInput struct {
	Name string `json:"name" jsonschema:"the sandbox's name"`
	Path string `json:"path" jsonschema:"absolute path of a directory inside the sandbox"`
}

// Entry is one file in a listing.
type Entry struct {
	Name    string    `json:"name"`
	Type    string    `json:"type" jsonschema:"file, dir, symlink or other"`
	Size    int64     `json:"size"`
	Mode    string    `json:"mode" jsonschema:"permission bits in octal"`
	ModTime time.Time `json:"mod_time"`
	Target  string    `json:"target,omitempty" jsonschema:"a symlink's target"`
}

// Listing is file_list's result.
type Listing struct {
	Path    string  `json:"path"`
	Entries []Entry `json:"entries"`
}

// maxFileRead is the most file_read returns at once: a model's context
// is the limit, not den's.
const maxFileRead = 1 << 20

func (s *server) fileTools(srv *mcp.Server) {
	add(s, srv, &mcp.Tool{
		Name:        "file_read",
		Title:       "Read a file",
		Description: "Read a file from a sandbox: as text, or base64 when it is not text.",
		Annotations: readOnly(),
	}, func(ctx context.Context, c *client.Client, _ *mcp.CallToolRequest, in ReadInput) (FileContent, error) {
		limit := in.MaxBytes
		if limit < 0 || limit > maxFileRead {
			return FileContent{}, invalid("max_bytes is %d: give 1 to %d, or leave it out", limit, maxFileRead)
		}
		if limit == 0 {
			limit = maxFileRead
		}
		fi, err := c.Stat(ctx, in.Name, in.Path)
		if err != nil {
			return FileContent{}, err
		}
		if fi.Type == "dir" {
			return FileContent{}, invalid("%s is a directory: list it with file_list", in.Path)
		}
		rc, err := c.ReadFile(ctx, in.Name, in.Path)
		if err != nil {
			return FileContent{}, err
		}
		defer rc.Close()
		b, err := io.ReadAll(io.LimitReader(rc, int64(limit)))
		if err != nil {
			return FileContent{}, err
		}
		out := FileContent{Path: in.Path, Size: fi.Size, Truncated: int64(len(b)) < fi.Size, Encoding: "utf-8", Content: string(b)}
		if !utf8.Valid(b) {
			out.Encoding, out.Content = "base64", base64.StdEncoding.EncodeToString(b)
		}
		return out, nil
	})

	add(s, srv, &mcp.Tool{
		Name:        "file_write",
		Title:       "Write a file",
		Description: "Create or replace a file in a sandbox.",
		Annotations: changes(true, true),
	}, func(ctx context.Context, c *client.Client, _ *mcp.CallToolRequest, in WriteInput) (Written, error) {
		data := []byte(in.Content)
		switch strings.ToLower(in.Encoding) {
		case "", "utf-8", "utf8", "text":
		case "base64":
			var err error
			if data, err = base64.StdEncoding.DecodeString(in.Content); err != nil {
				return Written{}, invalid("content is not valid base64 (%v): encode the bytes with standard base64, or give text with encoding utf-8", err)
			}
		default:
			return Written{}, invalid("encoding %q: give utf-8 or base64", in.Encoding)
		}
		mode, err := octalMode(in.Mode)
		if err != nil {
			return Written{}, err
		}
		if err := c.WriteFile(ctx, in.Name, in.Path, mode, strings.NewReader(string(data))); err != nil {
			return Written{}, err
		}
		return Written{Path: in.Path, Bytes: len(data)}, nil
	})

	add(s, srv, &mcp.Tool{
		Name:        "file_list",
		Title:       "List a directory",
		Description: "List the files in a directory of a sandbox.",
		Annotations: readOnly(),
	}, func(ctx context.Context, c *client.Client, _ *mcp.CallToolRequest, in ListInput) (Listing, error) {
		fis, err := c.ListFiles(ctx, in.Name, in.Path)
		if err != nil {
			return Listing{}, err
		}
		out := Listing{Path: in.Path, Entries: []Entry{}}
		for _, fi := range fis {
			out.Entries = append(out.Entries, Entry{
				Name: fi.Name, Type: fi.Type, Size: fi.Size, Mode: strconv.FormatUint(uint64(fi.Mode), 8),
				ModTime: fi.ModTime, Target: fi.Target,
			})
		}
		return out, nil
	})
}

// octalMode is permission bits written in octal, such as 755; "" is 0,
// den's default.
func octalMode(s string) (fs.FileMode, error) {
	if s == "" {
		return 0, nil
	}
	m, err := strconv.ParseUint(s, 8, 32)
	if err != nil || m > 0o7777 {
		return 0, invalid("mode %q: give permission bits in octal, such as 644 or 755", s)
	}
	return fs.FileMode(m), nil
}
