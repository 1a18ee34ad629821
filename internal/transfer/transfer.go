package transfer

import (
	"context"
	"errors"
	"io"
	"sync"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/guest"
)

// File transfers: a `den cp` streams a file or a tree through den-init
// for as long as it takes. Like a follower, a transfer counts as use, so
// the idle policy leaves the sandbox running meanwhile, and a sandbox put
// to sleep on request ends every transfer first, with an error saying
// so, so that no client waits on a frozen den-init. A file written
// half-way is never put in place: den-init writes to a temporary file and
// renames it only once it is whole.

// Files are the guest's file calls a transfer wraps: the file system
// inside a running sandbox, as den-init serves it. Paths are absolute
// paths inside the sandbox.
type Files interface {
	Stat(ctx context.Context, path string) (guest.FileInfo, error)
	ReadDir(ctx context.Context, path string) ([]guest.FileInfo, error)
	ReadFile(ctx context.Context, path string) (io.ReadCloser, guest.FileInfo, error)
	WriteFile(ctx context.Context, path string, r io.Reader, o guest.WriteOptions) error
	Mkdir(ctx context.Context, req guest.MkdirRequest) error
	Remove(ctx context.Context, path string, recursive bool) error
	Move(ctx context.Context, from, to string) error
	ReadTar(ctx context.Context, path string) (io.ReadCloser, error)
	// Watch streams the changes under dir to each, after calling ready
	// once the watch is in place; nil when dir went away.
	Watch(ctx context.Context, dir string, recursive bool, ready func(), each func(guest.WatchEvent) error) error
	WriteTar(ctx context.Context, dir string, r io.Reader) error
}

// Registry keeps the file transfers under way in each sandbox, so that a
// sleep can end them.
//
// Its map is per node by design: a transfer lives only as long as the
// call that streams it, on the node that runs the sandbox.
type Registry struct {
	// hold counts a sandbox in use until the func it returns is called.
	hold func(id string) (release func())

	mu sync.Mutex
	// sandboxes are the transfers of each sandbox, by sandbox id.
	sandboxes map[string]*transfers
}

// NewRegistry returns an empty registry whose transfers count as use of
// their sandbox through hold for as long as they last.
func NewRegistry(hold func(id string) (release func())) *Registry {
	return &Registry{hold: hold, sandboxes: map[string]*transfers{}}
}

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

// files is a sandbox's file system whose every call is a transfer.
type files struct {
	g     Files
	r     *Registry
	id    string
	slept int // transfers' slept count when handed out
}

// Files returns g, the file system of sandbox id, with every call a
// transfer: counted as use while it lasts, ended by a sleep (End). A
// call begun after a sleep that followed this hand-out is refused.
func (r *Registry) Files(id string, g Files) Files {
	r.mu.Lock()
	defer r.mu.Unlock()
	return &files{g: g, r: r, id: id, slept: r.ofLocked(id).slept}
}

// ofLocked returns sandbox id's transfers; the caller holds r.mu.
func (r *Registry) ofLocked(id string) *transfers {
	ts := r.sandboxes[id]
	if ts == nil {
		ts = &transfers{open: map[*transfer]struct{}{}}
		r.sandboxes[id] = ts
	}
	return ts
}

// begin registers a transfer under ctx, counted as use until end. One
// begun after the sandbox went to sleep is ended at once.
func (f *files) begin(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	t := &transfer{cancel: cancel}
	r := f.r
	release := r.hold(f.id)
	r.mu.Lock()
	ts := r.ofLocked(f.id)
	if ts.slept != f.slept {
		cancel(transferEnded{errdefs.WithHint(errdefs.Conflict("the sandbox went to sleep before the file transfer began"),
			"copy it again: a copy wakes the sandbox")})
	}
	ts.open[t] = struct{}{}
	r.mu.Unlock()
	var once sync.Once
	return ctx, func() {
		once.Do(func() {
			r.mu.Lock()
			delete(r.ofLocked(f.id).open, t)
			r.mu.Unlock()
			cancel(nil)
			release()
		})
	}
}

// End ends every file transfer in sandbox id, named name, which is about
// to sleep as verb says ("paused", "hibernated"); each ends with an
// error saying so, and a file system handed out before refuses more.
func (r *Registry) End(id, name, verb string) {
	why := transferEnded{errdefs.WithHint(errdefs.Conflict("sandbox %q was %s during the file transfer", name, verb),
		"copy it again: a copy wakes the sandbox")}
	r.mu.Lock()
	ts := r.ofLocked(id)
	ts.slept++
	open := make([]*transfer, 0, len(ts.open))
	for t := range ts.open {
		open = append(open, t)
	}
	r.mu.Unlock()
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

func (f *files) Stat(ctx context.Context, path string) (guest.FileInfo, error) {
	ctx, end := f.begin(ctx)
	defer end()
	fi, err := f.g.Stat(ctx, path)
	return fi, ended(ctx, err)
}

func (f *files) ReadDir(ctx context.Context, path string) ([]guest.FileInfo, error) {
	ctx, end := f.begin(ctx)
	defer end()
	fis, err := f.g.ReadDir(ctx, path)
	return fis, ended(ctx, err)
}

func (f *files) ReadFile(ctx context.Context, path string) (io.ReadCloser, guest.FileInfo, error) {
	ctx, end := f.begin(ctx)
	rc, fi, err := f.g.ReadFile(ctx, path)
	if err != nil {
		end()
		return nil, fi, ended(ctx, err)
	}
	return &transferReader{ReadCloser: rc, ctx: ctx, end: end}, fi, nil
}

func (f *files) WriteFile(ctx context.Context, path string, r io.Reader, o guest.WriteOptions) error {
	ctx, end := f.begin(ctx)
	defer end()
	return ended(ctx, f.g.WriteFile(ctx, path, r, o))
}

func (f *files) Mkdir(ctx context.Context, req guest.MkdirRequest) error {
	ctx, end := f.begin(ctx)
	defer end()
	return ended(ctx, f.g.Mkdir(ctx, req))
}

// Watch is a transfer for as long as it lasts: use that keeps the
// sandbox awake, ended by a sleep.
func (f *files) Watch(ctx context.Context, dir string, recursive bool, ready func(), each func(guest.WatchEvent) error) error {
	ctx, end := f.begin(ctx)
	defer end()
	return ended(ctx, f.g.Watch(ctx, dir, recursive, ready, each))
}

func (f *files) Remove(ctx context.Context, path string, recursive bool) error {
	ctx, end := f.begin(ctx)
	defer end()
	return ended(ctx, f.g.Remove(ctx, path, recursive))
}

func (f *files) Move(ctx context.Context, from, to string) error {
	ctx, end := f.begin(ctx)
	defer end()
	return ended(ctx, f.g.Move(ctx, from, to))
}

func (f *files) ReadTar(ctx context.Context, path string) (io.ReadCloser, error) {
	ctx, end := f.begin(ctx)
	rc, err := f.g.ReadTar(ctx, path)
	if err != nil {
		end()
		return nil, ended(ctx, err)
	}
	return &transferReader{ReadCloser: rc, ctx: ctx, end: end}, nil
}

func (f *files) WriteTar(ctx context.Context, dir string, r io.Reader) error {
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
