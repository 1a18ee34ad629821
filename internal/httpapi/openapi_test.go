package httpapi

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/den-dev/den/api"
)

// spec is the part of the OpenAPI document the tests look at.
type spec struct {
	Paths      map[string]map[string]yaml.Node `yaml:"paths"`
	Components struct {
		Schemas map[string]struct {
			Properties map[string]yaml.Node `yaml:"properties"`
		} `yaml:"schemas"`
	} `yaml:"components"`
}

func loadSpec(t *testing.T) spec {
	t.Helper()
	var s spec
	if err := yaml.Unmarshal(api.OpenAPI, &s); err != nil {
		t.Fatalf("parsing api/openapi.yaml: %v", err)
	}
	return s
}

// TestRoutesMatchOpenAPI keeps the served routes and the documented ones
// the same set, in both directions.
func TestRoutesMatchOpenAPI(t *testing.T) {
	s := loadSpec(t)
	documented := map[Route]bool{}
	for path, item := range s.Paths {
		for key := range item {
			if slices.Contains(httpMethods, key) {
				documented[Route{Method: strings.ToUpper(key), Path: path}] = true
			}
		}
	}
	served := map[Route]bool{}
	for _, rt := range Routes() {
		if served[rt] {
			t.Errorf("route %s %s registered twice", rt.Method, rt.Path)
		}
		served[rt] = true
		if !documented[rt] {
			t.Errorf("route %s %s is served but not in api/openapi.yaml", rt.Method, rt.Path)
		}
	}
	for rt := range documented {
		if !served[rt] {
			t.Errorf("route %s %s is in api/openapi.yaml but not served", rt.Method, rt.Path)
		}
	}
}

// TestOpenAPIRefsResolve checks every $ref names a component that exists.
func TestOpenAPIRefsResolve(t *testing.T) {
	var doc yaml.Node
	if err := yaml.Unmarshal(api.OpenAPI, &doc); err != nil {
		t.Fatal(err)
	}
	var root map[string]any
	if err := yaml.Unmarshal(api.OpenAPI, &root); err != nil {
		t.Fatal(err)
	}
	n := 0
	var walk func(*yaml.Node)
	walk = func(node *yaml.Node) {
		if node.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(node.Content); i += 2 {
				if node.Content[i].Value == "$ref" {
					n++
					ref := node.Content[i+1].Value
					if !resolves(root, ref) {
						t.Errorf("line %d: $ref %q does not resolve", node.Content[i].Line, ref)
					}
				}
			}
		}
		for _, c := range node.Content {
			walk(c)
		}
	}
	walk(&doc)
	if n == 0 {
		t.Fatal("no $ref found; is the document empty?")
	}
}

func resolves(root map[string]any, ref string) bool {
	path, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return false
	}
	var cur any = root
	for _, part := range strings.Split(path, "/") {
		m, ok := cur.(map[string]any)
		if !ok {
			return false
		}
		if cur, ok = m[part]; !ok {
			return false
		}
	}
	return true
}

// TestOpenAPISchemasMatchTypes checks each schema lists exactly the JSON
// fields of its wire type.
func TestOpenAPISchemasMatchTypes(t *testing.T) {
	types := map[string]any{
		"Error": api.Error{}, "ErrorBody": api.ErrorBody{}, "Health": api.Health{}, "PoolHealth": api.PoolHealth{},
		"CreateSandboxRequest": api.CreateSandboxRequest{}, "Sandbox": api.Sandbox{}, "SandboxList": api.SandboxList{},
		"Event": api.Event{}, "EventList": api.EventList{}, "StreamEvent": api.StreamEvent{},
		"ExecRequest": api.ExecRequest{}, "Run": api.Run{}, "RunList": api.RunList{},
		"SignalRequest": api.SignalRequest{}, "Resize": api.Resize{},
		"FileInfo": api.FileInfo{}, "FileList": api.FileList{},
		"MkdirRequest": api.MkdirRequest{}, "MoveRequest": api.MoveRequest{},
		"Image": api.Image{}, "ImageList": api.ImageList{},
		"WarmPool": api.WarmPool{}, "SetWarmRequest": api.SetWarmRequest{}, "WarmHealth": api.WarmHealth{},
		"BuildImageRequest": api.BuildImageRequest{}, "PullImageRequest": api.PullImageRequest{},
		"Progress": api.Progress{},
		"Policy":   api.Policy{}, "NextAction": api.NextAction{},
		"LimitsRequest": api.LimitsRequest{}, "Usage": api.Usage{}, "NetworkPolicy": api.NetworkPolicy{},
		"SecretGrant": api.SecretGrant{}, "SecretGrants": api.SecretGrants{}, "Process": api.Process{}, "ProcessList": api.ProcessList{},
		"Checkpoint": api.Checkpoint{}, "CheckpointList": api.CheckpointList{},
		"CheckpointRequest": api.CheckpointRequest{}, "RestoreRequest": api.RestoreRequest{},
		"ForkRequest": api.ForkRequest{}, "RecoverRequest": api.RecoverRequest{},
		"CreateTokenRequest": api.CreateTokenRequest{}, "Token": api.Token{}, "TokenList": api.TokenList{},
		"AuditEntry": api.AuditEntry{}, "AuditList": api.AuditList{},
		"Secret": api.Secret{}, "SecretList": api.SecretList{},
		"Quota": api.Quota{}, "Owner": api.Owner{}, "OwnerList": api.OwnerList{}, "SetOwnerRequest": api.SetOwnerRequest{},
		"ExposedPort": api.ExposedPort{}, "ExposePortRequest": api.ExposePortRequest{}, "PortURL": api.PortURL{},
		"Node": api.Node{}, "NodeList": api.NodeList{}, "DrainResult": api.DrainResult{}, "DrainFailure": api.DrainFailure{}, "DrainMove": api.DrainMove{},
		"MoveSandboxRequest": api.MoveSandboxRequest{}, "AdoptRequest": api.AdoptRequest{},
		"Peer": api.Peer{}, "PeerList": api.PeerList{}, "AddPeerRequest": api.AddPeerRequest{}, "RefreshPeerRequest": api.RefreshPeerRequest{},
		"Harness": api.Harness{}, "HarnessSet": api.HarnessSet{}, "ServiceSpec": api.ServiceSpec{}, "Service": api.Service{}, "ServiceList": api.ServiceList{}, "ServiceExit": api.ServiceExit{},
	}
	schemas := loadSpec(t).Components.Schemas
	for name, v := range types {
		schema, ok := schemas[name]
		if !ok {
			t.Errorf("schema %s missing", name)
			continue
		}
		var want []string
		rt := reflect.TypeOf(v)
		for i := range rt.NumField() {
			tag, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
			if tag != "" && tag != "-" {
				want = append(want, tag)
			}
		}
		var got []string
		for p := range schema.Properties {
			got = append(got, p)
		}
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("schema %s has properties %v, the Go type has JSON fields %v", name, got, want)
		}
	}
}
