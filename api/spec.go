package api

import _ "embed"

// OpenAPI is the OpenAPI 3.0 description of every route, as YAML. dend
// serves it at GET /v1/openapi.yaml.
//
//go:embed openapi.yaml
var OpenAPI []byte
