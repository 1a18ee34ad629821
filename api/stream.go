package api

// The exec stream is a WebSocket at GET /v1/sandboxes/{name}/exec/ws.
//
// The client sends one text message first: an ExecRequest as JSON. After
// that, each binary message in either direction is a frame: one byte of
// FrameKind followed by the payload.
//
//	server → client: FrameStdout, FrameStderr (output bytes),
//	                 FrameStarted (JSON Run), FrameExit (JSON Run, last)
//	                 FrameError (JSON Error, last)
//	client → server: FrameStdin (bytes), FrameStdinEOF (empty),
//	                 FrameResize (JSON Resize), FrameSignal (JSON SignalRequest)
//
// Output is delivered in order and completely: the server sends FrameExit
// only after every byte the command wrote.
//
// A browser cannot set an Authorization header on a WebSocket, so this
// route also takes the token as a subprotocol: the client offers two,
// ExecSubprotocol and TokenSubprotocolPrefix followed by the token, and
// the server selects ExecSubprotocol. The token never appears in a URL.
type FrameKind byte

// Subprotocols of the exec stream.
const (
	ExecSubprotocol        = "den.exec.v1"
	TokenSubprotocolPrefix = "den.token."
)

// Frame kinds of the exec stream.
const (
	FrameStdout   FrameKind = 1
	FrameStderr   FrameKind = 2
	FrameStarted  FrameKind = 3
	FrameExit     FrameKind = 4
	FrameError    FrameKind = 5
	FrameStdin    FrameKind = 10
	FrameStdinEOF FrameKind = 11
	FrameResize   FrameKind = 12
	FrameSignal   FrameKind = 13
)

// Resize is the payload of FrameResize.
type Resize struct {
	Rows uint16 `json:"rows"`
	Cols uint16 `json:"cols"`
}

// Log streams, for GET /v1/sandboxes/{name}/runs/{run}/logs?stream=.
const (
	StreamStdout = "stdout"
	StreamStderr = "stderr"
)

// A followed log stream (GET .../logs?follow=true) says how it ended in
// the LogEndTrailer trailer: LogEnded once the run ended and all of its
// output was sent, else the JSON Error that stopped it (the sandbox was
// put to sleep, say). A stream that ends without the trailer was cut:
// resume it from the offset reached, the run may still be going.
const (
	LogEndTrailer = "Den-Log-End"
	LogEnded      = "ended"
)
