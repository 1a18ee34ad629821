package sshgate

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/guest"
	"github.com/den-dev/den/internal/sandbox"
)

// serveSFTP serves the sftp subsystem on the session's channel from the
// sandbox's file API, as the sandbox's default user: relative paths start
// in that user's home, and files and directories made belong to them.
func (s *session) serveSFTP(ctx context.Context) {
	defer s.end()
	id := s.l.sandbox.ID
	files, err := s.g.cfg.Sandboxes.Files(ctx, id)
	s.g.recordFor(ctx, s.l, "sftp", "", err)
	if err != nil {
		_, _ = io.WriteString(s.ch.Stderr(), message(err))
		return
	}
	user := ""
	if b := s.l.sandbox.Spec.Base; b != nil {
		user = b.User
	}
	fsrv := &fileServer{s: s, ctx: ctx, user: user, home: homeOf(ctx, files, user), budget: s.sftp}
	h := sftp.Handlers{FileGet: fsrv, FilePut: fsrv, FileCmd: fsrv, FileList: fsrv}
	pc, stop := newPacer(ctx, s.ch, s.ch, maxInFlight, s.sftp.flight)
	defer stop()
	srv := sftp.NewRequestServer(pc, h, sftp.WithStartDirectory(fsrv.home))
	status := uint32(0)
	if err := srv.Serve(); err != nil && !errors.Is(err, io.EOF) {
		s.g.log.Debug("ssh: sftp ended", "sandbox", s.l.sandbox.Name, "err", err)
		status = exitFailed
	}
	srv.Close()
	// The client's ssh exits with this, and scp with that.
	_, _ = s.ch.SendRequest("exit-status", false, ssh.Marshal(exitStatus{Status: status}))
	_ = s.ch.CloseWrite()
}

// fileServer answers SFTP requests from the sandbox's file API.
type fileServer struct {
	s    *session
	ctx  context.Context
	user string // who owns what is made: the image's user, "" for den-init's
	home string
	// budget is what the connection's SFTP sessions may hold: handles,
	// and writes ahead of their place.
	budget *sftpBudget

	// mu guards open, the files being written, by path.
	mu   sync.Mutex
	open map[string]*seqWriter
}

var (
	_ sftp.FileReader         = (*fileServer)(nil)
	_ sftp.FileWriter         = (*fileServer)(nil)
	_ sftp.FileCmder          = (*fileServer)(nil)
	_ sftp.RealPathFileLister = (*fileServer)(nil)
	_ sftp.ReadlinkFileLister = (*fileServer)(nil)
)

// files returns the sandbox's file system, waking it if it went to sleep
// since the last request.
func (f *fileServer) files() (sandbox.Files, error) {
	return f.s.g.cfg.Sandboxes.Files(f.ctx, f.s.l.sandbox.ID)
}

// Fileread opens a file to read.
func (f *fileServer) Fileread(r *sftp.Request) (io.ReaderAt, error) {
	files, err := f.files()
	if err != nil {
		return nil, sftpError(err)
	}
	open := func() (io.ReadCloser, error) {
		rc, info, err := files.ReadFile(f.ctx, r.Filepath)
		if err == nil && info.Type == "dir" {
			rc.Close()
			err = errdefs.Invalid("%s is a directory", r.Filepath)
		}
		return rc, sftpError(err)
	}
	free, err := f.budget.open()
	if err != nil {
		return nil, err
	}
	rc, err := open()
	if err != nil {
		free()
		return nil, err
	}
	return readHandle{newSeqReader(rc, open, f.budget.reads), free}, nil
}

// readHandle is a file open to read; closing it gives its handle back.
type readHandle struct {
	*seqReader
	free func()
}

func (h readHandle) Close() error {
	defer h.free()
	return h.seqReader.Close()
}

// writeHandle is a file open to write; closing it gives its handle back.
type writeHandle struct {
	*seqWriter
	free func()
}

func (h writeHandle) Close() error {
	defer h.free()
	return h.seqWriter.Close()
}

// listHandle is a directory open to list; closing it gives its handle
// back.
type listHandle struct {
	lister
	free func()
}

func (h listHandle) Close() error {
	h.free()
	return nil
}

// Filewrite opens a file to write. den writes files whole: the file is
// replaced when the client closes it, and not at all if the transfer
// broke off. OpenSSH's scp and sftp open without truncating, write, then
// truncate to what they wrote (fsetstat): that is a whole write too.
// Writing only part of a longer file in place is refused at close.
func (f *fileServer) Filewrite(r *sftp.Request) (io.WriterAt, error) {
	flags := r.Pflags()
	if flags.Append {
		return nil, unsupported("appending to a file")
	}
	files, err := f.files()
	if err != nil {
		return nil, sftpError(err)
	}
	free, err := f.budget.open()
	if err != nil {
		return nil, err
	}
	oldSize := int64(-1)
	if !flags.Trunc {
		if info, err := files.Stat(f.ctx, r.Filepath); err == nil {
			oldSize = info.Size
		}
	}
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	w := newSeqWriter(pw, done, f.budget)
	w.whole = flags.Trunc
	w.oldSize = oldSize
	f.writing(r.Filepath, w)
	go func() {
		defer f.written(r.Filepath, w)
		err := files.WriteFile(f.ctx, r.Filepath, pr, guest.WriteOptions{User: f.user})
		pr.CloseWithError(errors.Join(err, io.ErrClosedPipe))
		f.s.g.recordFor(f.ctx, f.s.l, "sftp put", r.Filepath, err)
		done <- sftpError(err)
	}()
	return writeHandle{w, free}, nil
}

// writing and written keep the writers open by path, for fsetstat.
func (f *fileServer) writing(p string, w *seqWriter) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.open == nil {
		f.open = map[string]*seqWriter{}
	}
	f.open[p] = w
}

func (f *fileServer) written(p string, w *seqWriter) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.open[p] == w {
		delete(f.open, p)
	}
}

func (f *fileServer) writer(p string) *seqWriter {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.open[p]
}

// Filecmd changes the file system.
func (f *fileServer) Filecmd(r *sftp.Request) error {
	files, err := f.files()
	if err != nil {
		return sftpError(err)
	}
	var what, detail string
	switch r.Method {
	case "Rename", "PosixRename":
		what, detail = "sftp rename", r.Filepath+" -> "+r.Target
		err = files.Move(f.ctx, r.Filepath, r.Target)
	case "Remove", "Rmdir":
		what, detail = "sftp remove", r.Filepath
		err = files.Remove(f.ctx, r.Filepath, false)
	case "Mkdir":
		what, detail = "sftp mkdir", r.Filepath
		err = files.Mkdir(f.ctx, guest.MkdirRequest{Path: r.Filepath, User: f.user})
	case "Setstat":
		return f.setstat(files, r)
	default: // Link, Symlink
		return unsupported(strings.ToLower(r.Method))
	}
	f.s.g.recordFor(f.ctx, f.s.l, what, detail, err)
	return sftpError(err)
}

// setstat accepts what changes nothing (a size the file has already) and
// refuses the rest: den's file API sets no modes or times.
func (f *fileServer) setstat(files sandbox.Files, r *sftp.Request) error {
	flags, attrs := r.AttrFlags(), r.Attributes()
	if w := f.writer(r.Filepath); w != nil {
		// A file being written: truncating it to what was written is
		// what a whole write does; the rest waits for the file.
		if flags.Size && !w.truncateAt(int64(attrs.Size)) {
			return unsupported("truncating a file being written anywhere but at its end")
		}
		if flags.Permissions || flags.UidGid {
			return unsupported("changing the mode or owner of a file being written (run chmod over ssh after)")
		}
		return nil
	}
	info, err := files.Stat(f.ctx, r.Filepath)
	if err != nil {
		return sftpError(err)
	}
	switch {
	case flags.Size && int64(attrs.Size) != info.Size:
		return unsupported("changing a file's size")
	case flags.Permissions && attrs.FileMode().Perm() != fs.FileMode(info.Mode).Perm():
		return unsupported("changing a file's mode (run chmod over ssh instead)")
	case flags.UidGid && (attrs.UID != info.UID || attrs.GID != info.GID):
		return unsupported("changing a file's owner (run chown over ssh instead)")
	}
	return nil // times: kept as the write left them
}

// Filelist lists a directory or stats a file.
func (f *fileServer) Filelist(r *sftp.Request) (sftp.ListerAt, error) {
	files, err := f.files()
	if err != nil {
		return nil, sftpError(err)
	}
	switch r.Method {
	case "List":
		// pkg/sftp asks for this when it opens the directory, and keeps
		// what it gets until the handle is closed.
		free, err := f.budget.open()
		if err != nil {
			return nil, err
		}
		ents, err := files.ReadDir(f.ctx, r.Filepath)
		if err != nil {
			free()
			return nil, sftpError(err)
		}
		out := make(lister, len(ents))
		for i, e := range ents {
			out[i] = fileInfo{e}
		}
		return listHandle{out, free}, nil
	case "Stat":
		info, err := files.Stat(f.ctx, r.Filepath)
		if err == nil && info.Type == "symlink" && info.Target != "" {
			target := info.Target
			if !path.IsAbs(target) {
				target = path.Join(path.Dir(r.Filepath), target)
			}
			var to guest.FileInfo
			if to, err = files.Stat(f.ctx, target); err == nil {
				to.Name = info.Name
				info = to
			}
		}
		if err != nil {
			return nil, sftpError(err)
		}
		return lister{fileInfo{info}}, nil
	case "Lstat":
		info, err := files.Stat(f.ctx, r.Filepath)
		if err != nil {
			return nil, sftpError(err)
		}
		return lister{fileInfo{info}}, nil
	}
	return nil, unsupported(strings.ToLower(r.Method))
}

// Readlink returns a symbolic link's target.
func (f *fileServer) Readlink(p string) (string, error) {
	files, err := f.files()
	if err != nil {
		return "", sftpError(err)
	}
	info, err := files.Stat(f.ctx, p)
	if err != nil {
		return "", sftpError(err)
	}
	if info.Type != "symlink" {
		return "", errdefs.Invalid("%s is not a symbolic link", p)
	}
	return info.Target, nil
}

// RealPath makes p absolute, from the home directory.
func (f *fileServer) RealPath(p string) (string, error) {
	if !path.IsAbs(p) {
		p = path.Join(f.home, p)
	}
	return path.Clean(p), nil
}

func unsupported(what string) error {
	return &fxError{err: errdefs.Invalid("den's SFTP does not support %s", what), code: sftp.ErrSSHFxOpUnsupported}
}

// lister is a fixed list of entries.
type lister []os.FileInfo

func (l lister) ListAt(out []os.FileInfo, off int64) (int, error) {
	if off >= int64(len(l)) {
		return 0, io.EOF
	}
	n := copy(out, l[off:])
	if n < len(out) || off+int64(n) == int64(len(l)) {
		return n, io.EOF
	}
	return n, nil
}

// fileInfo is a guest file as an os.FileInfo, with its owner.
type fileInfo struct{ i guest.FileInfo }

func (fi fileInfo) Name() string       { return fi.i.Name }
func (fi fileInfo) Size() int64        { return fi.i.Size }
func (fi fileInfo) ModTime() time.Time { return fi.i.ModTime }
func (fi fileInfo) IsDir() bool        { return fi.i.Type == "dir" }
func (fi fileInfo) Sys() any           { return nil }
func (fi fileInfo) Uid() uint32        { return fi.i.UID }
func (fi fileInfo) Gid() uint32        { return fi.i.GID }
func (fi fileInfo) Mode() fs.FileMode {
	m := fs.FileMode(fi.i.Mode).Perm()
	switch fi.i.Type {
	case "dir":
		m |= fs.ModeDir
	case "symlink":
		m |= fs.ModeSymlink
	case "other":
		m |= fs.ModeIrregular
	}
	return m
}

// homeOf is the home directory of user (a name or uid, with an optional
// :group; "" for root) in the sandbox's /etc/passwd; "/" when it has none.
func homeOf(ctx context.Context, files sandbox.Files, user string) string {
	rc, _, err := files.ReadFile(ctx, "/etc/passwd")
	if err != nil {
		if user == "" || user == "root" || user == "0" {
			return "/root"
		}
		return "/"
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, 1<<20))
	if err != nil {
		return "/"
	}
	return passwdHome(b, user)
}

// passwdHome finds user's home in a passwd file.
func passwdHome(passwd []byte, user string) string {
	name, _, _ := strings.Cut(user, ":")
	if name == "" {
		name = "0"
	}
	_, numeric := strconv.Atoi(name)
	sc := bufio.NewScanner(bytes.NewReader(passwd))
	for sc.Scan() {
		fields := strings.Split(sc.Text(), ":")
		if len(fields) < 7 {
			continue
		}
		if (numeric == nil && fields[2] == name) || (numeric != nil && fields[0] == name) {
			if !path.IsAbs(fields[5]) {
				return "/"
			}
			return path.Clean(fields[5])
		}
	}
	return "/"
}
