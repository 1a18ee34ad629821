// Package envdpb holds the protocol of envd, the agent E2B's SDKs talk to
// inside each sandbox: the .proto files (den's own text, keeping the wire
// names and numbers), and the Go code generated from them for protobuf
// (process, filesystem) and Connect RPC (processconnect,
// filesystemconnect). The generated code is committed; generate.sh makes
// it again.
package envdpb

//go:generate ./generate.sh
