package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/httpapi/httpx"
	"github.com/den-dev/den/internal/image"
	"github.com/den-dev/den/internal/sandbox"
)

// fakeImages implements ImageService. The long operations report the
// progress in steps, then fail with err if it is set, else return the
// image; errBefore fails them before any progress.
type fakeImages struct {
	calls     *calls
	err       error
	errBefore error
	steps     []image.Progress
	imported  string // the body Import read
}

func newFakeImages(c *calls) *fakeImages {
	return &fakeImages{calls: c, steps: []image.Progress{
		{Phase: "download", Current: 1, Total: 2},
		{Phase: "extract", Message: "unpacking"},
	}}
}

func (f *fakeImages) image(name string) *sandbox.Image {
	return &sandbox.Image{Name: name, Source: "builtin", SizeBytes: 42, CreatedAt: testTime}
}

func (f *fakeImages) List(ctx context.Context) ([]*sandbox.Image, error) {
	f.calls.add("Images.List")
	if f.errBefore != nil {
		return nil, f.errBefore
	}
	return nil, nil
}

func (f *fakeImages) Get(ctx context.Context, name string) (*sandbox.Image, error) {
	f.calls.add("Images.Get", name)
	if f.errBefore != nil {
		return nil, f.errBefore
	}
	return f.image(name), nil
}

func (f *fakeImages) Remove(ctx context.Context, name string) error {
	f.calls.add("Images.Remove", name)
	return f.errBefore
}

func (f *fakeImages) Versions(ctx context.Context, name string) ([]*sandbox.Image, error) {
	return nil, nil
}

func (f *fakeImages) long(name string, progress func(image.Progress)) (*sandbox.Image, error) {
	if f.errBefore != nil {
		return nil, f.errBefore
	}
	for _, p := range f.steps {
		progress(p)
	}
	if f.err != nil {
		return nil, f.err
	}
	return f.image(name), nil
}

func (f *fakeImages) Build(ctx context.Context, name string, force bool, progress func(image.Progress)) (*sandbox.Image, error) {
	f.calls.add("Images.Build", name, force)
	return f.long(name, progress)
}

func (f *fakeImages) Import(ctx context.Context, name string, r io.Reader, progress func(image.Progress)) (*sandbox.Image, error) {
	f.calls.add("Images.Import", name)
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	f.imported = string(b)
	return f.long(name, progress)
}

func (f *fakeImages) Pull(ctx context.Context, ref, name string, insecure bool, progress func(image.Progress)) (*sandbox.Image, error) {
	f.calls.add("Images.Pull", ref, name, insecure)
	return f.long(name, progress)
}

// readProgress parses an NDJSON body.
func readProgress(t *testing.T, body []byte) []api.Progress {
	t.Helper()
	var out []api.Progress
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		var p api.Progress
		if err := json.Unmarshal(sc.Bytes(), &p); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		out = append(out, p)
	}
	return out
}

func TestImageProgressStream(t *testing.T) {
	e := newEnv(t)
	resp, body := e.do("POST", "/v1/images/build", strings.NewReader(`{"name":"busybox","force":true}`))
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("status %d, type %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	lines := readProgress(t, body)
	if len(lines) != 3 {
		t.Fatalf("got %d lines, want 3: %s", len(lines), body)
	}
	if lines[0].Phase != "download" || lines[0].Current != 1 || lines[0].Total != 2 || lines[1].Message != "unpacking" {
		t.Errorf("progress lines = %+v", lines[:2])
	}
	last := lines[2]
	if !last.Done || last.Image == nil || last.Image.Name != "busybox" || last.Error != nil {
		t.Errorf("last line = %+v", last)
	}
	if got := e.calls.find("Images.Build"); len(got) != 1 || got[0].Args[1] != true {
		t.Errorf("Build calls = %v", got)
	}
}

func TestImageErrorAfterProgressIsInBand(t *testing.T) {
	e := newEnv(t)
	e.img.err = errdefs.WithHint(errdefs.Unavailable("registry refused"), "try again")
	resp, body := e.do("POST", "/v1/images/pull", strings.NewReader(`{"ref":"example.test/x:1","name":"x"}`))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	lines := readProgress(t, body)
	last := lines[len(lines)-1]
	if !last.Done || last.Image != nil || last.Error == nil ||
		last.Error.Code != api.CodeUnavailable || last.Error.Hint != "try again" || last.Phase != phaseFailed {
		t.Errorf("last line = %+v (error %+v)", last, last.Error)
	}
}

func TestImageInternalErrorAfterProgressIsLoggedNotLeaked(t *testing.T) {
	e := newEnv(t)
	e.img.err = io.ErrUnexpectedEOF
	_, body := e.do("POST", "/v1/images/build", strings.NewReader(`{"name":"debian"}`))
	lines := readProgress(t, body)
	last := lines[len(lines)-1]
	if last.Error == nil || last.Error.Code != api.CodeInternal || last.Error.Message != httpx.InternalMessage {
		t.Errorf("last line error = %+v", last.Error)
	}
	if !strings.Contains(e.logBuf.String(), "unexpected EOF") {
		t.Errorf("internal error not logged: %s", e.logBuf.String())
	}
}

func TestImageErrorBeforeProgressIsPlain(t *testing.T) {
	e := newEnv(t)
	e.img.errBefore = errdefs.WithHint(errdefs.Invalid("no recipe %q", "nope"), "use debian or busybox")
	resp, body := e.do("POST", "/v1/images/build", strings.NewReader(`{"name":"nope"}`))
	assertError(t, resp, body, http.StatusBadRequest, api.CodeInvalid)
}

func TestImageImportStreamsBody(t *testing.T) {
	e := newEnv(t)
	resp, body := e.do("POST", "/v1/images/import?name=mine", strings.NewReader("TARBYTES"))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	if e.img.imported != "TARBYTES" {
		t.Errorf("import read %q", e.img.imported)
	}
	lines := readProgress(t, body)
	if last := lines[len(lines)-1]; last.Image == nil || last.Image.Name != "mine" {
		t.Errorf("last line = %+v", last)
	}
}

func TestImageRequestsCheckedBeforeTheManager(t *testing.T) {
	for _, tt := range []struct{ name, path, body string }{
		{"import without name", "/v1/images/import", "x"},
		{"import bad name", "/v1/images/import?name=Bad_Name", "x"},
		{"build without name", "/v1/images/build", `{}`},
		{"pull without ref", "/v1/images/pull", `{"name":"x"}`},
		{"pull unknown field", "/v1/images/pull", `{"ref":"a","tag":"b"}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			resp, body := e.do("POST", tt.path, strings.NewReader(tt.body))
			assertError(t, resp, body, http.StatusBadRequest, api.CodeInvalid)
			e.noCalls()
		})
	}
}

func TestImageCRUD(t *testing.T) {
	e := newEnv(t)
	resp, body := e.do("GET", "/v1/images", nil)
	if resp.StatusCode != 200 || strings.TrimSpace(string(body)) != `{"images":[]}` {
		t.Errorf("list: %d %s", resp.StatusCode, body)
	}
	var im api.Image
	resp, body = e.do("GET", "/v1/images/debian", nil)
	if err := json.Unmarshal(body, &im); err != nil || resp.StatusCode != 200 || im.Name != "debian" || im.SizeBytes != 42 {
		t.Errorf("get: %d %s", resp.StatusCode, body)
	}
	resp, _ = e.do("DELETE", "/v1/images/debian", nil)
	if resp.StatusCode != http.StatusNoContent {
		t.Errorf("delete: %d", resp.StatusCode)
	}
	e.img.errBefore = errdefs.Conflict("image in use")
	resp, body = e.do("DELETE", "/v1/images/debian", nil)
	assertError(t, resp, body, http.StatusConflict, api.CodeConflict)
}
