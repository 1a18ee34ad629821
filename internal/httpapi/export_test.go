package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/internal/export"
	"github.com/den-dev/den/internal/imagecrypt"
	"github.com/den-dev/den/internal/sandbox"
)

// fakeExports records the imports it is asked for.
type fakeExports struct {
	imports []export.ImportParams
	body    string
	keyID   string
}

func (f *fakeExports) Prepare(ctx context.Context, ref string, fsOnly bool) (*export.Export, error) {
	return nil, io.ErrUnexpectedEOF
}

func (f *fakeExports) Import(ctx context.Context, r io.Reader, key *imagecrypt.Key, p export.ImportParams) (*export.Result, error) {
	b, _ := io.ReadAll(r)
	f.imports, f.body, f.keyID = append(f.imports, p), string(b), key.ID()
	hdr := export.Header{Name: "agent", Memory: true, Spec: sandbox.Spec{Image: "busybox"}}
	return &export.Result{Sandbox: &sandbox.Sandbox{ID: "id1", Name: p.Name, State: sandbox.StateHibernated}, Header: hdr}, nil
}

func TestImportRoute(t *testing.T) {
	fake := &fakeExports{}
	e := newEnv(t, func(c *Config) { c.Export = fake })
	key := strings.Repeat("0f", 32)

	resp, body := e.do("POST", "/v1/sandboxes/import?name=moved", strings.NewReader("archive"))
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), api.HeaderArchiveKey) {
		t.Fatalf("import without a key: %d %s", resp.StatusCode, body)
	}
	resp, body = e.do("POST", "/v1/sandboxes/import", strings.NewReader("archive"), api.HeaderArchiveKey, "not-a-key")
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "64 hex digits") {
		t.Fatalf("import with a malformed key: %d %s", resp.StatusCode, body)
	}
	if len(fake.imports) != 0 {
		t.Fatalf("refused imports reached the service: %+v", fake.imports)
	}

	resp, body = e.do("POST", "/v1/sandboxes/import?name=moved", strings.NewReader("archive"), api.HeaderArchiveKey, key)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("import: %d %s", resp.StatusCode, body)
	}
	var got api.Import
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	if got.Sandbox.Name != "moved" || got.From != "agent" || !got.Memory || got.Sandbox.State != "hibernated" {
		t.Fatalf("import answered %+v", got)
	}
	want, _ := export.ParseKey(key)
	if len(fake.imports) != 1 || fake.imports[0].Name != "moved" || fake.body != "archive" || fake.keyID != want.ID() {
		t.Fatalf("service got %+v, body %q, key %s", fake.imports, fake.body, fake.keyID)
	}

	resp, body = e.do("POST", "/v1/sandboxes/web/export", nil, api.HeaderArchiveKey, "short")
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("export with a malformed key: %d %s", resp.StatusCode, body)
	}
}

func TestExportNotEnabled(t *testing.T) {
	e := newEnv(t)
	for _, path := range []string{"/v1/sandboxes/web/export", "/v1/sandboxes/import"} {
		if resp, body := e.do("POST", path, nil); resp.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("POST %s without an export service: %d %s", path, resp.StatusCode, body)
		}
	}
}
