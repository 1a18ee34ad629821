package guest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/den-dev/den/internal/guest"
)

// A process gets its secrets in its environment, through both start
// calls, and the rest of its environment as usual.
func TestSecretsInEnvironment(t *testing.T) {
	c := serve(t)
	secret := []byte("s3cr3t value with spaces = and \u00e9")
	spec := guest.ProcSpec{
		Argv:    []string{"sh", "-c", `printf '%s|%s' "$API_KEY" "$PLAIN"`},
		Env:     []string{"PLAIN=visible"},
		Secrets: []guest.Secret{{Env: "API_KEY", Value: secret}},
	}
	res := run(t, c, spec)
	if want := string(secret) + "|visible"; res.stdout != want || res.status.ExitCode != 0 {
		t.Fatalf("Start: stdout %q (exit %d, stderr %q), want %q", res.stdout, res.status.ExitCode, res.stderr, want)
	}
	var out bytes.Buffer
	st, err := c.StartStream(context.Background(), spec, func(guest.ProcStatus) error { return nil },
		func(kind byte, p []byte) error { out.Write(p); return nil })
	if err != nil || st.ExitCode != 0 || out.String() != string(secret)+"|visible" {
		t.Fatalf("StartStream: %v exit %d output %q", err, st.ExitCode, out.String())
	}
	// The argv den-init reports is the command's, not the wrapper's.
	if st.Argv[0] != "sh" {
		t.Fatalf("argv reported: %q", st.Argv)
	}
}

// Secrets are never part of a spec's JSON, and the framing round-trips
// and refuses what does not belong.
func TestSecretsEncoding(t *testing.T) {
	spec := guest.ProcSpec{Argv: []string{"true"}, Secrets: []guest.Secret{{Env: "A", Value: []byte("hidden-1")}, {File: "/run/secrets/b", Value: []byte("hidden-2")}}}
	js, _ := json.Marshal(spec)
	if strings.Contains(string(js), "hidden") {
		t.Fatalf("a secret in the JSON: %s", js)
	}
	frames, err := guest.EncodeSecrets(spec.Secrets)
	if err != nil {
		t.Fatal(err)
	}
	got, err := guest.DecodeSecrets(frames)
	if err != nil || len(got) != 2 || got[0].Env != "A" || string(got[0].Value) != "hidden-1" || got[1].File != "/run/secrets/b" || string(got[1].Value) != "hidden-2" {
		t.Fatalf("round trip: %v %+v", err, got)
	}
	for _, bad := range []guest.Secret{
		{File: "/etc/passwd", Value: []byte("x")},
		{File: "/run/secrets/../x", Value: []byte("x")},
		{File: "/run/secrets/a/b", Value: []byte("x")},
		{Env: "A=B", Value: []byte("x")},
		{Env: "A", File: "/run/secrets/a"},
		{Env: "BIG", Value: make([]byte, guest.MaxSecretBytes+1)},
	} {
		if _, err := guest.EncodeSecrets([]guest.Secret{bad}); err == nil {
			t.Errorf("encoded a bad secret %+v", bad.Env+bad.File)
		}
	}
	for _, cut := range []int{1, 3, 5, len(frames) - 1} {
		if _, err := guest.DecodeSecrets(frames[:cut]); err == nil {
			t.Errorf("decoded frames cut at %d", cut)
		}
	}
}

// FuzzDecodeSecrets: no input panics the frame reader.
func FuzzDecodeSecrets(f *testing.F) {
	frames, _ := guest.EncodeSecrets([]guest.Secret{{Env: "A", Value: []byte("v")}, {File: "/run/secrets/f", Value: []byte("w")}})
	f.Add(frames)
	f.Add([]byte{'e', 0, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		secrets, err := guest.DecodeSecrets(b)
		if err != nil {
			return
		}
		again, err := guest.EncodeSecrets(secrets)
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("decoded frames do not encode back: %v", err)
		}
	})
}
