package e2b

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"path"
	"sync"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
	pb "github.com/den-dev/den/internal/e2b/envdpb/filesystem"
	"github.com/den-dev/den/internal/e2b/envdpb/filesystem/filesystemconnect"
)

// filesystem.Filesystem over den's file verbs. Paths are the user's:
// relative ones start at their home, and what is made belongs to them.
type filesystem struct {
	filesystemconnect.UnimplementedFilesystemHandler
	d *Door
}

var _ filesystemconnect.FilesystemHandler = (*filesystem)(nil)

// maxListDepth bounds ListDir's depth: each level is a call per directory.
const maxListDepth = 16

func (f *filesystem) Stat(ctx context.Context, req *connect.Request[pb.StatRequest]) (*connect.Response[pb.StatResponse], error) {
	t := targetOf(ctx)
	fi, err := t.files().Stat(ctx, t.sb.ID, t.abs(req.Msg.GetPath()))
	if err != nil {
		return nil, fsError(err)
	}
	return connect.NewResponse(&pb.StatResponse{Entry: entryInfo(fi, t.linkType(ctx, fi))}), nil
}

// ListDir lists a directory down to depth levels, in the order of a walk
// of the tree (each directory's entries by name, each followed by what is
// under it), without following symbolic links.
func (f *filesystem) ListDir(ctx context.Context, req *connect.Request[pb.ListDirRequest]) (*connect.Response[pb.ListDirResponse], error) {
	t := targetOf(ctx)
	depth := int(max(req.Msg.GetDepth(), 1))
	if depth > maxListDepth {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("depth %d is over %d", depth, maxListDepth))
	}
	root := t.abs(req.Msg.GetPath())
	fi, err := t.files().Stat(ctx, t.sb.ID, root)
	if err != nil {
		return nil, fsError(err)
	}
	if fi.Type != "dir" {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("%s is not a directory", root))
	}
	out := &pb.ListDirResponse{}
	var walk func(dir string, level int) error
	walk = func(dir string, level int) error {
		files, err := t.files().ListFiles(ctx, t.sb.ID, dir)
		if err != nil {
			return err
		}
		for i := range files {
			e := entryInfo(&files[i], t.linkType(ctx, &files[i]))
			if files[i].Type == "other" {
				continue
			}
			out.Entries = append(out.Entries, e)
			if files[i].Type == "dir" && level < depth {
				if err := walk(files[i].Path, level+1); err != nil && !client.IsNotFound(err) {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(root, 1); err != nil {
		return nil, fsError(err)
	}
	return connect.NewResponse(out), nil
}

// MakeDir makes a directory and its parents for the user; one that is
// there already is already_exists, which the SDK answers false.
func (f *filesystem) MakeDir(ctx context.Context, req *connect.Request[pb.MakeDirRequest]) (*connect.Response[pb.MakeDirResponse], error) {
	t := targetOf(ctx)
	p := t.abs(req.Msg.GetPath())
	if fi, err := t.files().Stat(ctx, t.sb.ID, p); err == nil {
		if fi.Type == "dir" {
			return nil, connect.NewError(connect.CodeAlreadyExists, fmt.Errorf("directory %s already exists", p))
		}
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("%s exists and is not a directory", p))
	} else if !client.IsNotFound(err) {
		return nil, fsError(err)
	}
	if err := t.files().Mkdir(ctx, t.sb.ID, api.MkdirRequest{Path: p, Parents: true, ParentsByRoot: true, User: t.userOf()}); err != nil {
		return nil, fsError(err)
	}
	fi, err := t.files().Stat(ctx, t.sb.ID, p)
	if err != nil {
		return nil, fsError(err)
	}
	return connect.NewResponse(&pb.MakeDirResponse{Entry: entryInfo(fi, "")}), nil
}

// Move renames source to destination, making the destination's missing
// parents for the user.
func (f *filesystem) Move(ctx context.Context, req *connect.Request[pb.MoveRequest]) (*connect.Response[pb.MoveResponse], error) {
	t := targetOf(ctx)
	from, to := t.abs(req.Msg.GetSource()), t.abs(req.Msg.GetDestination())
	if _, err := t.files().Stat(ctx, t.sb.ID, from); err != nil {
		return nil, fsError(err)
	}
	if err := t.files().Mkdir(ctx, t.sb.ID, api.MkdirRequest{Path: path.Dir(to), Parents: true, ParentsByRoot: true, User: t.userOf()}); err != nil {
		return nil, fsError(err)
	}
	if err := t.files().Move(ctx, t.sb.ID, from, to); err != nil {
		return nil, fsError(err)
	}
	fi, err := t.files().Stat(ctx, t.sb.ID, to)
	if err != nil {
		return nil, fsError(err)
	}
	return connect.NewResponse(&pb.MoveResponse{Entry: entryInfo(fi, t.linkType(ctx, fi))}), nil
}

// Remove removes a file or a whole tree; a path that is not there is no
// error.
func (f *filesystem) Remove(ctx context.Context, req *connect.Request[pb.RemoveRequest]) (*connect.Response[pb.RemoveResponse], error) {
	t := targetOf(ctx)
	if err := t.files().RemoveFile(ctx, t.sb.ID, t.abs(req.Msg.GetPath()), true); err != nil && !client.IsNotFound(err) {
		return nil, fsError(err)
	}
	return connect.NewResponse(&pb.RemoveResponse{}), nil
}

// WatchDir streams the changes under a directory: the start first, then
// one event per change, named relative to the directory (with its entry
// when asked, but for removals and renames, whose file is gone), with
// keepalives while nothing happens. It ends when the directory goes
// away; a sleep or a kill of the sandbox cuts it, as E2B's proxy would.
// allowNetworkMounts lets envd watch a directory on NFS or the like; a
// den sandbox has no network mounts, so there is nothing it could refuse.
func (f *filesystem) WatchDir(ctx context.Context, req *connect.Request[pb.WatchDirRequest], stream *connect.ServerStream[pb.WatchDirResponse]) error {
	t := targetOf(ctx)
	dir := t.abs(req.Msg.GetPath())
	w, err := t.files().WatchFiles(ctx, t.sb.ID, dir, req.Msg.GetRecursive())
	if err != nil {
		return fsError(err)
	}
	defer w.Close()
	var mu sync.Mutex
	send := func(r *pb.WatchDirResponse) error {
		mu.Lock()
		defer mu.Unlock()
		return stream.Send(r)
	}
	if err := send(&pb.WatchDirResponse{Event: &pb.WatchDirResponse_Start{Start: &pb.WatchDirResponse_StartEvent{}}}); err != nil {
		return err
	}
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		tick := time.NewTicker(keepaliveInterval(req.Header()) / 2)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				_ = send(&pb.WatchDirResponse{Event: &pb.WatchDirResponse_Keepalive{Keepalive: &pb.WatchDirResponse_KeepAlive{}}})
			}
		}
	}()
	for {
		ev, err := w.Next()
		switch {
		case errors.Is(err, io.EOF):
			return nil // the directory went away
		case err != nil && ctx.Err() != nil:
			return ctxError(ctx)
		case err != nil:
			f.d.log.Debug("e2b: watch cut", "sandbox", t.sb.ID, "dir", dir, "err", err)
			panic(http.ErrAbortHandler)
		}
		fe := fsEvent(ctx, t, dir, ev, req.Msg.GetIncludeEntry())
		if fe == nil {
			continue
		}
		if err := send(&pb.WatchDirResponse{Event: &pb.WatchDirResponse_Filesystem{Filesystem: fe}}); err != nil {
			return err
		}
	}
}

// fsEvent is E2B's event for a change den saw under dir, with the
// entry changed when asked (but for removals and renames, whose file is
// gone); nil for a change E2B has no name for.
func fsEvent(ctx context.Context, t *target, dir string, ev api.WatchEvent, includeEntry bool) *pb.FilesystemEvent {
	typ, ok := eventTypes[ev.Op]
	if !ok || ev.Name == "" {
		return nil
	}
	fe := &pb.FilesystemEvent{Name: ev.Name, Type: typ}
	if includeEntry && typ != pb.EventType_EVENT_TYPE_REMOVE && typ != pb.EventType_EVENT_TYPE_RENAME {
		if fi, err := t.files().Stat(ctx, t.sb.ID, path.Join(dir, ev.Name)); err == nil {
			fe.Entry = entryInfo(fi, t.linkType(ctx, fi))
		}
	}
	return fe
}

// eventTypes are E2B's names for den's watch ops.
var eventTypes = map[string]pb.EventType{
	"create": pb.EventType_EVENT_TYPE_CREATE,
	"write":  pb.EventType_EVENT_TYPE_WRITE,
	"remove": pb.EventType_EVENT_TYPE_REMOVE,
	"rename": pb.EventType_EVENT_TYPE_RENAME,
	"chmod":  pb.EventType_EVENT_TYPE_CHMOD,
}

// fsError is rpcError for file calls.
func fsError(err error) error {
	var cerr *connect.Error
	if errors.As(err, &cerr) {
		return cerr
	}
	return rpcError(err)
}

// maxLinks bounds the symbolic links linkType follows, as Linux's 40.
const maxLinks = 40

// linkType is the type ("file", "dir", ...) of what the symbolic link fi
// leads to, through links; "" for a link that leads nowhere, and for
// what is not a link.
func (t *target) linkType(ctx context.Context, fi *api.FileInfo) string {
	for range maxLinks {
		if fi.Type != "symlink" {
			return fi.Type
		}
		next, err := t.files().Stat(ctx, t.sb.ID, linkTarget(fi))
		if err != nil {
			return ""
		}
		fi = next
	}
	return ""
}

// linkTarget is the absolute path the symbolic link fi names.
func linkTarget(fi *api.FileInfo) string {
	if path.IsAbs(fi.Target) {
		return path.Clean(fi.Target)
	}
	return path.Join(path.Dir(fi.Path), fi.Target)
}

// entryInfo is E2B's description of a file. A symbolic link has the type
// of what it leads to (linkType: "file" or "dir", else unspecified), as
// envd gives it, with its target in SymlinkTarget: SDKs before 2.45 know
// no symlink type and fail on it.
func entryInfo(fi *api.FileInfo, linkType string) *pb.EntryInfo {
	mode := fs.FileMode(fi.Mode & 0o777)
	if fi.Mode&0o4000 != 0 {
		mode |= fs.ModeSetuid
	}
	if fi.Mode&0o2000 != 0 {
		mode |= fs.ModeSetgid
	}
	if fi.Mode&0o1000 != 0 {
		mode |= fs.ModeSticky
	}
	e := &pb.EntryInfo{
		Name: fi.Name, Path: fi.Path, Size: fi.Size, Mode: fi.Mode & 0o777,
		Owner: fi.Owner, Group: fi.Group, ModifiedTime: timestamppb.New(fi.ModTime),
		Metadata: metadataOf(fi.Xattrs),
	}
	switch fi.Type {
	case "file":
		e.Type = pb.FileType_FILE_TYPE_FILE
	case "dir":
		e.Type = pb.FileType_FILE_TYPE_DIRECTORY
		mode |= fs.ModeDir
	case "symlink":
		switch linkType {
		case "file":
			e.Type = pb.FileType_FILE_TYPE_FILE
		case "dir":
			e.Type = pb.FileType_FILE_TYPE_DIRECTORY
		}
		mode |= fs.ModeSymlink
		e.SymlinkTarget = ptr(linkTarget(fi))
	}
	e.Permissions = mode.String()
	if e.Owner == "" {
		e.Owner = fmt.Sprint(fi.UID)
	}
	if e.Group == "" {
		e.Group = fmt.Sprint(fi.GID)
	}
	return e
}
