package initd

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/den-dev/den/internal/guest"
)

// The test process's one reaper, started by the first test that needs a
// server (not in TestMain: the fuzzing coordinator waits for its workers).
var (
	reaperOnce sync.Once
	testReaper *Reaper
)

// serve runs a Server on 127.0.0.1 and returns its base URL.
func serve(t *testing.T) string {
	t.Helper()
	reaperOnce.Do(func() {
		r, err := NewReaper(slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		testReaper = r
	})
	srv, err := New(Config{Token: "tok", Reaper: testReaper})
	if err != nil {
		t.Fatal(err)
	}
	return serveServer(t, srv)
}

// serveServer serves srv on a loopback port until the test ends.
func serveServer(t *testing.T, srv *Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

func request(t *testing.T, method, url, token string, body io.Reader) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, url, body)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

func TestErrorStatuses(t *testing.T) {
	base := serve(t)
	huge := `{"argv":["true"],"env":["X=` + strings.Repeat("x", guest.MaxJSONBody) + `"]}`
	tests := []struct {
		name, method, path, token, body string
		status                          int
		code                            string
	}{
		{"no token", "GET", "/v1/ping", "", "", 401, "unauthorized"},
		{"wrong token", "GET", "/v1/ping", "tok2", "", 401, "unauthorized"},
		{"wrong token, unknown route", "GET", "/nope", "bad", "", 401, "unauthorized"},
		{"unknown route", "GET", "/v1/nope", "tok", "", 404, "not_found"},
		{"unknown proc", "GET", "/v1/procs/nope", "tok", "", 404, "not_found"},
		{"unknown proc stream", "GET", "/v1/procs/nope/stream", "tok", "", 404, "not_found"},
		{"oversized JSON", "POST", "/v1/procs", "tok", huge, 413, "too_large"},
		{"malformed JSON", "POST", "/v1/procs", "tok", "{", 400, "invalid"},
		{"empty JSON", "POST", "/v1/procs", "tok", "", 400, "invalid"},
		{"bad path", "GET", "/v1/files/stat?path=rel", "tok", "", 400, "invalid"},
		{"missing file", "GET", "/v1/files/stat?path=/no/such/file", "tok", "", 404, "not_found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := request(t, tt.method, base+tt.path, tt.token, strings.NewReader(tt.body))
			var e guest.ErrorBody
			if err := json.Unmarshal(body, &e); err != nil {
				t.Fatalf("body %q: %v", body, err)
			}
			if resp.StatusCode != tt.status || e.Code != tt.code || e.Message == "" {
				t.Fatalf("got %d %+v, want %d %s", resp.StatusCode, e, tt.status, tt.code)
			}
		})
	}
}

// The stream is frames: kind, big-endian length, payload; exit last.
func TestStreamFrames(t *testing.T) {
	base := serve(t)
	resp, body := request(t, "POST", base+"/v1/procs", "tok",
		strings.NewReader(`{"argv":["sh","-c","printf out; printf err >&2; exit 7"]}`))
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("start: %d %s", resp.StatusCode, body)
	}
	var st guest.ProcStatus
	json.Unmarshal(body, &st)

	_, raw := request(t, "GET", base+"/v1/procs/"+st.ID+"/stream?stdout=0&stderr=0", "tok", nil)
	got := map[byte]string{}
	var kinds []byte
	r := bytes.NewReader(raw)
	for r.Len() > 0 {
		var hdr [5]byte
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			t.Fatal(err)
		}
		p := make([]byte, binary.BigEndian.Uint32(hdr[1:]))
		if _, err := io.ReadFull(r, p); err != nil {
			t.Fatal(err)
		}
		got[hdr[0]] += string(p)
		kinds = append(kinds, hdr[0])
	}
	if got[guest.FrameStdout] != "out" || got[guest.FrameStderr] != "err" {
		t.Fatalf("output %q", got)
	}
	if kinds[len(kinds)-1] != guest.FrameExit {
		t.Fatalf("last frame kind %d", kinds[len(kinds)-1])
	}
	var final guest.ProcStatus
	if err := json.Unmarshal([]byte(got[guest.FrameExit]), &final); err != nil || final.ExitCode != 7 || final.Running {
		t.Fatalf("exit frame %q: %v", got[guest.FrameExit], err)
	}

	// From the end, the stream is the exit frame alone; past it, invalid.
	_, raw = request(t, "GET", base+"/v1/procs/"+st.ID+"/stream?stdout=3&stderr=3", "tok", nil)
	if len(raw) == 0 || raw[0] != guest.FrameExit {
		t.Fatalf("stream from the end starts with %v", raw[:min(len(raw), 5)])
	}
	resp, _ = request(t, "GET", base+"/v1/procs/"+st.ID+"/stream?stdout=4", "tok", nil)
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("stream past the end: %d", resp.StatusCode)
	}
}
