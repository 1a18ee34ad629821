package cli

import (
	"bytes"
	"testing"
	"time"

	"github.com/den-dev/den/api"
)

var now = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

func TestRenderSandboxes(t *testing.T) {
	sbs := []api.Sandbox{
		{Name: "web", State: api.StateRunning, Image: "debian", CPUs: 1, MemoryBytes: 1 << 30, Generation: 3, CreatedAt: now.Add(-3 * time.Minute)},
		{Name: "a-much-longer-name", State: api.StateStopped, Image: "busybox", CPUs: 0.5, MemoryBytes: 512 << 20, Generation: 12, CreatedAt: now.Add(-50 * time.Hour)},
	}
	var buf bytes.Buffer
	if err := RenderSandboxes(&buf, sbs, now); err != nil {
		t.Fatal(err)
	}
	want := "" +
		"NAME                 STATE     IMAGE     CPUS   MEMORY   GEN   AGE\n" +
		"web                  running   debian    1      1GiB     3     3 minutes ago\n" +
		"a-much-longer-name   stopped   busybox   0.5    512MiB   12    2 days ago\n"
	if got := buf.String(); got != want {
		t.Errorf("table:\n%s\nwant:\n%s", got, want)
	}

	// An outdated sandbox brings the OUTDATED column.
	sbs[1].ImageVersion, sbs[1].ImageOutdated = 1, true
	buf.Reset()
	if err := RenderSandboxes(&buf, sbs, now); err != nil {
		t.Fatal(err)
	}
	want = "" +
		"NAME                 STATE     IMAGE     CPUS   MEMORY   GEN   AGE             OUTDATED\n" +
		"web                  running   debian    1      1GiB     3     3 minutes ago   -\n" +
		"a-much-longer-name   stopped   busybox   0.5    512MiB   12    2 days ago      runs busybox@1\n"
	if got := buf.String(); got != want {
		t.Errorf("table:\n%s\nwant:\n%s", got, want)
	}
}

func TestEscapeControl(t *testing.T) {
	for in, want := range map[string]string{
		"plain":             "plain",
		"naïve 日本 🙂 \uFFFD": "naïve 日本 🙂 \uFFFD",
		"a\tb":              `a\tb`,
		"bad \xff byte":     `bad \xff byte`,
		"\x1b[2J":           `\x1b[2J`,
		"del\x7f":           `del\x7f`,
		"c1 \u009b":         `c1 \u009b`,
	} {
		if got := EscapeControl(in); got != want {
			t.Errorf("EscapeControl(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseKeyValues(t *testing.T) {
	env := func(k string) string { return map[string]string{"HOME": "/home/me"}[k] }
	got, err := ParseKeyValues("--env", []string{"A=1", "B=x=y", "HOME", "EMPTY="}, env)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"A": "1", "B": "x=y", "HOME": "/home/me", "EMPTY": ""}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	for _, bad := range []string{"=v", "nokey"} {
		if _, err := ParseKeyValues("--label", []string{bad}, nil); err == nil {
			t.Errorf("label %q accepted", bad)
		}
	}
}
