#!/usr/bin/env bash
# Regenerates the Go code of envd's protocol from the .proto files here:
#   apt-get install protobuf-compiler
#   go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
#   go install connectrpc.com/connect/cmd/protoc-gen-connect-go@v1.21.1
# then `go generate ./internal/e2b/envdpb/` (or run this script). The output
# is committed, so building den never needs protoc; TestGeneratedIsFresh
# fails when a .proto changed without it. OUT (default: here) lets the
# test generate elsewhere and compare.
set -euo pipefail
cd "$(dirname "$0")"
out=${OUT:-.}
PATH="$(go env GOPATH)/bin:$PATH"
protoc -I . -I /usr/include \
	--go_out="$out" --go_opt=paths=source_relative \
	--connect-go_out="$out" --connect-go_opt=paths=source_relative \
	process/process.proto filesystem/filesystem.proto
# The digest of the sources the code was made from, for the test that
# runs without protoc.
sha256sum process/process.proto filesystem/filesystem.proto >"$out/protos.sha256"
