package client_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

func portRoutes(domain string) func(*fakeDend) {
	return func(f *fakeDend) {
		f.routes["PUT /v1/sandboxes/{name}/ports/{port}"] = func(w http.ResponseWriter, r *http.Request) {
			var req api.ExposePortRequest
			if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
				writeErr(w, 400, api.CodeInvalid, "invalid JSON body", "")
				return
			}
			writeJSON(w, 200, api.Sandbox{Name: r.PathValue("name"), Ports: []api.ExposedPort{{Port: 8080, Public: req.Public}}})
		}
		f.routes["DELETE /v1/sandboxes/{name}/ports/{port}"] = func(w http.ResponseWriter, r *http.Request) {
			if r.PathValue("port") != "8080" {
				writeErr(w, 404, api.CodeNotFound, "port "+r.PathValue("port")+" of sandbox \"web\" is not exposed", "expose it first")
				return
			}
			w.WriteHeader(204)
		}
		f.routes["GET /v1/sandboxes/{name}/ports/{port}/url"] = func(w http.ResponseWriter, r *http.Request) {
			u := api.PortURL{Path: "/v1/sandboxes/web/ports/8080/proxy/?den_expires=1&den_signature=s", ExpiresAt: created}
			if domain != "" {
				u.URL = "http://8080-web." + domain + "/?den_expires=1&den_signature=s"
			}
			writeJSON(w, 200, u)
		}
	}
}

func TestPorts(t *testing.T) {
	transports(t, portRoutes(""), func(t *testing.T, f *fakeDend, c *client.Client) {
		ctx := t.Context()
		sb, err := c.ExposePort(ctx, "web", 8080, true)
		if err != nil || len(sb.Ports) != 1 || !sb.Ports[0].Public {
			t.Fatalf("expose: %+v %v", sb, err)
		}
		if got := f.last(); got.Method != "PUT" || got.Path != "/v1/sandboxes/web/ports/8080" || string(got.Body) != `{"public":true}` {
			t.Errorf("dend saw %s %s %s", got.Method, got.Path, got.Body)
		}
		if err := c.UnexposePort(ctx, "web", 8080); err != nil {
			t.Fatal(err)
		}
		if err := c.UnexposePort(ctx, "web", 3000); !client.IsNotFound(err) || client.Hint(err) == "" {
			t.Errorf("unexpose a port not exposed: %v", err)
		}
		u, err := c.PortURL(ctx, "web", 8080, 90*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if got := f.last(); got.RawQuery != "expires=1h30m0s" {
			t.Errorf("query %q", got.RawQuery)
		}
		// Over TCP the link is under the client's own address; over the
		// socket there is no address to give.
		if f.token == "" && u.URL != "" {
			t.Errorf("over the socket: URL %q", u.URL)
		}
		if f.token != "" && (!strings.HasPrefix(u.URL, "http://127.0.0.1:") || !strings.HasSuffix(u.URL, u.Path)) {
			t.Errorf("over TCP: URL %q", u.URL)
		}
		if _, err := c.PortURL(ctx, "web", 8080, 0); err != nil || f.last().RawQuery != "" {
			t.Errorf("default expiry: query %q, %v", f.last().RawQuery, err)
		}
	})
	transports(t, portRoutes("ports.test"), func(t *testing.T, f *fakeDend, c *client.Client) {
		u, err := c.PortURL(t.Context(), "web", 8080, 0)
		if err != nil || u.URL != "http://8080-web.ports.test/?den_expires=1&den_signature=s" {
			t.Errorf("with a ports domain: %+v %v", u, err)
		}
	})
}
