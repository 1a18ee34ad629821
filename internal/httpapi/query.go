package httpapi

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/httpapi/portproxy"
)

// A query parameter the route does not take is refused rather than
// ignored: `?since=garbage` on a route that has no since would otherwise
// answer as if the caller had been understood. What each route takes is
// what api/openapi.yaml documents for it, so the document stays the one
// description of the API.

// openAPIParam is a parameter as api/openapi.yaml writes it, inline or by
// reference to components/parameters.
type openAPIParam struct {
	Ref  string `yaml:"$ref"`
	Name string `yaml:"name"`
	In   string `yaml:"in"`
}

type openAPIOperation struct {
	Parameters []openAPIParam `yaml:"parameters"`
}

// documentedQueries returns, by "METHOD PATH", the query parameters each
// operation of the OpenAPI document takes.
func documentedQueries(doc []byte) (map[string][]string, error) {
	var d struct {
		Paths      map[string]map[string]yaml.Node `yaml:"paths"`
		Components struct {
			Parameters map[string]openAPIParam `yaml:"parameters"`
		} `yaml:"components"`
	}
	if err := yaml.Unmarshal(doc, &d); err != nil {
		return nil, fmt.Errorf("reading the OpenAPI document: %w", err)
	}
	resolve := func(ps []openAPIParam) ([]string, error) {
		var names []string
		for _, p := range ps {
			if p.Ref != "" {
				c, ok := d.Components.Parameters[strings.TrimPrefix(p.Ref, "#/components/parameters/")]
				if !ok {
					return nil, fmt.Errorf("unknown parameter reference %q", p.Ref)
				}
				p = c
			}
			if p.In == "query" {
				names = append(names, p.Name)
			}
		}
		return names, nil
	}
	out := map[string][]string{}
	for path, item := range d.Paths {
		var shared []openAPIParam
		if n, ok := item["parameters"]; ok {
			if err := n.Decode(&shared); err != nil {
				return nil, fmt.Errorf("%s: parameters: %w", path, err)
			}
		}
		for method, n := range item {
			if !slices.Contains(httpMethods, method) {
				continue
			}
			var op openAPIOperation
			if err := n.Decode(&op); err != nil {
				return nil, fmt.Errorf("%s %s: %w", method, path, err)
			}
			names, err := resolve(append(append([]openAPIParam(nil), shared...), op.Parameters...))
			if err != nil {
				return nil, fmt.Errorf("%s %s: %w", method, path, err)
			}
			out[strings.ToUpper(method)+" "+path] = names
		}
	}
	return out, nil
}

var httpMethods = []string{"get", "put", "post", "delete", "patch", "head", "options", "trace"}

// routeQueries is documentedQueries of den's own document. The document
// is embedded and checked by the tests, so failing to read it is a bug in
// this build, not a condition to serve through.
func routeQueries() map[string][]string {
	q, err := documentedQueries(api.OpenAPI)
	if err != nil {
		panic(err)
	}
	return q
}

// checkQuery refuses a request to rt whose query names a parameter rt
// does not take. Requests through an exposed port carry the
// application's own query and are not checked.
func checkQuery(rt route, takes []string, r *http.Request) error {
	if portproxy.IsProxy(rt.path) || r.URL.RawQuery == "" {
		return nil
	}
	for name := range r.URL.Query() {
		if slices.Contains(takes, name) {
			continue
		}
		hint := "this route takes no query parameters"
		if len(takes) > 0 {
			sorted := slices.Sorted(slices.Values(takes))
			hint = "this route takes: " + strings.Join(sorted, ", ")
		}
		return errdefs.WithHint(errdefs.Invalid("unknown query parameter %s=%q", name, r.URL.Query().Get(name)), hint)
	}
	return nil
}
