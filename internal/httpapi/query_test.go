package httpapi

import (
	"net/http"
	"strings"
	"testing"

	"github.com/den-dev/den/api"
)

// TestUnknownQueryRefused: a query parameter a route does not take is a
// 400 naming it and what the route takes, not silently ignored; the
// parameters a route documents are taken.
func TestUnknownQueryRefused(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		method, path string
		says, hint   string // "" for accepted
	}{
		{"GET", "/v1/sandboxes/alpha/events?since=garbage", `since="garbage"`, "takes no query parameters"},
		{"GET", "/v1/sandboxes/alpha/runs?limit=5&since=1h", `since="1h"`, "takes: limit"},
		{"DELETE", "/v1/sandboxes/alpha?forced=true", `forced="true"`, "takes: force"},
		{"GET", "/v1/sandboxes/alpha/runs?limit=5", "", ""},
		{"GET", "/v1/sandboxes/alpha/events", "", ""},
	} {
		resp, body := e.do(tc.method, tc.path, nil)
		if tc.says == "" {
			if resp.StatusCode == http.StatusBadRequest {
				t.Errorf("%s %s: %s", tc.method, tc.path, body)
			}
			continue
		}
		got := assertError(t, resp, body, http.StatusBadRequest, api.CodeInvalid)
		if !strings.Contains(got.Message, tc.says) || !strings.Contains(got.Hint, tc.hint) {
			t.Errorf("%s %s: %+v, want it to say %q with a hint %q", tc.method, tc.path, got, tc.says, tc.hint)
		}
	}
}

// TestEveryRouteHasDocumentedQueries: the table the check uses covers
// every route served.
func TestEveryRouteHasDocumentedQueries(t *testing.T) {
	q, err := documentedQueries(api.OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	for _, rt := range Routes() {
		if _, ok := q[rt.Method+" "+rt.Path]; !ok {
			t.Errorf("%s %s: not in the OpenAPI document", rt.Method, rt.Path)
		}
	}
	if got := q["GET /v1/sandboxes/{name}/runs/{run}/logs"]; len(got) != 4 {
		t.Errorf("logs takes %v, want stream, from, follow and wake", got)
	}
	if got := q["GET /v1/sandboxes/{name}/files/content"]; len(got) != 2 || got[0] != "as" || got[1] != "path" {
		t.Errorf("files/content takes %v, want as and path (by reference)", got)
	}
}
