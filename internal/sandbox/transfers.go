package sandbox

import (
	"context"
	"errors"
	"io"
	"sync"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/guest"
)

// File transfers: a `den cp` streams a file or a tree through den-init
// for as long as it takes. Like a follower (logs.go), a transfer
// counts as use, so the idle policy leaves the sandbox running meanwhile,
// and a sandbox put to sleep on request ends every transfer first, with
// an error saying so, so that no client waits on a frozen den-init. A
// file written half-way is never put in place: den-init writes to a
// temporary file and renames it only once it is whole.

// transfers are the file transfers under way in one sandbox.
type transfers struct {
	open map[*transfer]struct{}
	// slept counts the times its transfers were ended, so that a
	// transfer begun with a file system handed out before knows it came
	// too late.
	slept int
}

// transfer is one call to a sandbox's file system.
type transfer struct{ cancel context.CancelCauseFunc }

// transferEnded is why a sandbox's sleep ended a transfer.
type transferEnded struct{ error }

// transferFiles is a sandbox's file system whose every call is a
// transfer.
type transferFiles struct {
	g     Files
	s     *Service
	id    string
	slept int // transfers' slept count when handed out
}

// filesOf returns sb's file system; the caller holds sb's lock shared.
func (s *Service) filesOf(sb *Sandbox) Files {
	g := s.guestFor(sb)
	s.mu.Lock()
	defer s.mu.Unlock()
	return &transferFiles{g: g, s: s, id: sb.ID, slept: s.transfersOf(sb.ID).slept}
}

// transfersOf returns sandbox id's transfers; the caller holds s.mu.
func (s *Service) transfersOf(id string) *transfers {
	ts := s.transfers[id]
	if ts == nil {
		ts = &transfers{open: map[*transfer]struct{}{}}
		s.transfers[id] = ts
	}
	return ts
}

// begin registers a transfer under ctx, counted as use until end. One
// begun after the sandbox went to sleep is ended at once.
func (f *transferFiles) begin(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	t := &transfer{cancel: cancel}
	s := f.s
	s.mu.Lock()
	ts := s.transfersOf(f.id)
	if ts.slept != f.slept {
		cancel(transferEnded{errdefs.WithHint(errdefs.Conflict("the sandbox went to sleep before the file transfer began"),
			"copy it again: a copy wakes the sandbox")})
	}
	ts.open[t] = struct{}{}
	s.held[f.id]++
	s.mu.Unlock()
	var once sync.Once
	return ctx, func() {
		once.Do(func() {
			s.mu.Lock()
			delete(s.transfersOf(f.id).open, t)
			if s.held[f.id]--; s.held[f.id] <= 0 {
				delete(s.held, f.id)
			}
			s.mu.Unlock()
			cancel(nil)
			s.touch(f.id)
		})
	}
}

// endTransfers ends every file transfer in sb, which is about to sleep as
// verb says ("paused", "hibernated").
func (s *Service) endTransfers(sb *Sandbox, verb string) {
	why := transferEnded{errdefs.WithHint(errdefs.Conflict("sandbox %q was %s during the file transfer", sb.Name, verb),
		"copy it again: a copy wakes the sandbox")}
	s.mu.Lock()
	ts := s.transfersOf(sb.ID)
	ts.slept++
	open := make([]*transfer, 0, len(ts.open))
	for t := range ts.open {
		open = append(open, t)
	}
	s.mu.Unlock()
	for _, t := range open {
		t.cancel(why)
	}
}

// ended is err of a transfer under ctx, or why the transfer was ended
// when a sleep ended it.
func ended(ctx context.Context, err error) error {
	var why transferEnded
	if err != nil && errors.As(context.Cause(ctx), &why) {
		return why.error
	}
	return err
}

func (f *transferFiles) Stat(ctx context.Context, path string) (guest.FileInfo, error) {
	ctx, end := f.begin(ctx)
	defer end()
	fi, err := f.g.Stat(ctx, path)
	return fi, ended(ctx, err)
}

func (f *transferFiles) ReadDir(ctx context.Context, path string) ([]guest.FileInfo, error) {
	ctx, end := f.begin(ctx)
	defer end()
	fis, err := f.g.ReadDir(ctx, path)
	return fis, ended(ctx, err)
}

func (f *transferFiles) ReadFile(ctx context.Context, path string) (io.ReadCloser, guest.FileInfo, error) {
	ctx, end := f.begin(ctx)
	rc, fi, err := f.g.ReadFile(ctx, path)
	if err != nil {
		end()
		return nil, fi, ended(ctx, err)
	}
	return &transferReader{ReadCloser: rc, ctx: ctx, end: end}, fi, nil
}

func (f *transferFiles) WriteFile(ctx context.Context, path string, r io.Reader, o guest.WriteOptions) error {
	ctx, end := f.begin(ctx)
	defer end()
	return ended(ctx, f.g.WriteFile(ctx, path, r, o))
}

func (f *transferFiles) Mkdir(ctx context.Context, req guest.MkdirRequest) error {
	ctx, end := f.begin(ctx)
	defer end()
	return ended(ctx, f.g.Mkdir(ctx, req))
}

// Watch is a transfer for as long as it lasts: use that keeps the
// sandbox awake, ended by a sleep.
func (f *transferFiles) Watch(ctx context.Context, dir string, recursive bool, ready func(), each func(guest.WatchEvent) error) error {
	ctx, end := f.begin(ctx)
	defer end()
	return ended(ctx, f.g.Watch(ctx, dir, recursive, ready, each))
}

func (f *transferFiles) Remove(ctx context.Context, path string, recursive bool) error {
	ctx, end := f.begin(ctx)
	defer end()
	return ended(ctx, f.g.Remove(ctx, path, recursive))
}

func (f *transferFiles) Move(ctx context.Context, from, to string) error {
	ctx, end := f.begin(ctx)
	defer end()
	return ended(ctx, f.g.Move(ctx, from, to))
}

func (f *transferFiles) ReadTar(ctx context.Context, path string) (io.ReadCloser, error) {
	ctx, end := f.begin(ctx)
	rc, err := f.g.ReadTar(ctx, path)
	if err != nil {
		end()
		return nil, ended(ctx, err)
	}
	return &transferReader{ReadCloser: rc, ctx: ctx, end: end}, nil
}

func (f *transferFiles) WriteTar(ctx context.Context, dir string, r io.Reader) error {
	ctx, end := f.begin(ctx)
	defer end()
	return ended(ctx, f.g.WriteTar(ctx, dir, r))
}

// transferReader is a download that ends its transfer when closed.
type transferReader struct {
	io.ReadCloser
	ctx context.Context
	end func()
}

func (r *transferReader) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		err = ended(r.ctx, err)
	}
	return n, err
}

func (r *transferReader) Close() error {
	err := r.ReadCloser.Close()
	r.end()
	return err
}
