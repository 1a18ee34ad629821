package client_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

// ndjson writes each value as one line, flushing after each.
func ndjson(w http.ResponseWriter, lines ...any) {
	w.Header().Set("Content-Type", "application/x-ndjson")
	enc := json.NewEncoder(w)
	for _, l := range lines {
		_ = enc.Encode(l)
		w.(http.Flusher).Flush()
	}
}

func TestImageProgress(t *testing.T) {
	img := &api.Image{Name: "debian", Source: "builtin", SizeBytes: 123}
	var importedBytes int
	var importName string
	setup := func(f *fakeDend) {
		f.routes["POST /v1/images/build"] = func(w http.ResponseWriter, r *http.Request) {
			var req api.BuildImageRequest
			_ = json.NewDecoder(r.Body).Decode(&req)
			if req.Name == "broken" {
				ndjson(w, api.Progress{Phase: "bootstrap"},
					api.Progress{Done: true, Error: &api.Error{Code: api.CodeUnavailable, Message: "mmdebstrap failed", Hint: "check the mirror"}})
				return
			}
			if req.Name == "cut" {
				ndjson(w, api.Progress{Phase: "bootstrap"})
				return
			}
			ndjson(w,
				api.Progress{Phase: "bootstrap", Message: "fetching packages"},
				api.Progress{Phase: "bootstrap", Current: 5, Total: 10},
				api.Progress{Phase: "snapshot"},
				api.Progress{Phase: "done", Done: true, Image: img})
		}
		f.routes["POST /v1/images/import"] = func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			importedBytes, importName = len(b), r.URL.Query().Get("name")
			ndjson(w, api.Progress{Phase: "extract", Current: int64(len(b))}, api.Progress{Done: true, Image: &api.Image{Name: importName}})
		}
		f.routes["POST /v1/images/pull"] = func(w http.ResponseWriter, r *http.Request) {
			var req api.PullImageRequest
			_ = json.NewDecoder(r.Body).Decode(&req)
			ndjson(w, api.Progress{Done: true, Image: &api.Image{Name: req.Name, Ref: req.Ref}})
		}
	}
	transports(t, setup, func(t *testing.T, f *fakeDend, c *client.Client) {
		ctx := context.Background()
		var phases []string
		got, err := c.BuildImage(ctx, api.BuildImageRequest{Name: "debian", Force: true}, func(p api.Progress) {
			phases = append(phases, p.Phase)
		})
		if err != nil {
			t.Fatalf("BuildImage: %v", err)
		}
		if got.Name != "debian" || got.SizeBytes != 123 {
			t.Errorf("image = %+v", got)
		}
		if strings.Join(phases, ",") != "bootstrap,bootstrap,snapshot,done" {
			t.Errorf("progress callbacks: %v", phases)
		}
		if string(f.last().Body) != `{"name":"debian","force":true}` {
			t.Errorf("build body %s", f.last().Body)
		}

		_, err = c.BuildImage(ctx, api.BuildImageRequest{Name: "broken"}, nil)
		if !client.IsUnavailable(err) || err.Error() != "mmdebstrap failed" || client.Hint(err) != "check the mirror" {
			t.Errorf("in-band error = %v (hint %q)", err, client.Hint(err))
		}
		_, err = c.BuildImage(ctx, api.BuildImageRequest{Name: "cut"}, nil)
		if !client.IsUnavailable(err) || !strings.Contains(err.Error(), "ended before") {
			t.Errorf("a cut stream = %v", err)
		}

		got, err = c.ImportImage(ctx, "mine", strings.NewReader(strings.Repeat("x", 5000)), nil)
		if err != nil || got.Name != "mine" || importedBytes != 5000 || importName != "mine" {
			t.Errorf("ImportImage = %+v, %v (dend got %d bytes as %q)", got, err, importedBytes, importName)
		}

		got, err = c.PullImage(ctx, api.PullImageRequest{Ref: "127.0.0.1:5000/app:1", Name: "app", Insecure: true}, nil)
		if err != nil || got.Ref != "127.0.0.1:5000/app:1" {
			t.Errorf("PullImage = %+v, %v", got, err)
		}
		if string(f.last().Body) != `{"ref":"127.0.0.1:5000/app:1","name":"app","insecure":true}` {
			t.Errorf("pull body %s", f.last().Body)
		}
	})
}
