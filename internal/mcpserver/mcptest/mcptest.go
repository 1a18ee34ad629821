// Package mcptest speaks MCP's streamable HTTP transport at its plainest,
// one request at a time, for the tests and benchmarks that count what
// dend's /mcp does with many sessions.
package mcptest

import (
	"io"
	"net/http"
	"strings"
)

// Initialize opens a session.
const Initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"flood","version":"1"}}}`

// Call sends msg to the /mcp at url with method, as the bearer token, in
// session id ("" for none), and returns the answer's status, the session
// id it names and its body.
func Call(method, url, token, id, msg string) (status int, session, body string, err error) {
	req, err := http.NewRequest(method, url, strings.NewReader(msg))
	if err != nil {
		return 0, "", "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	if id != "" {
		req.Header.Set("Mcp-Session-Id", id)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), string(b), err
}
