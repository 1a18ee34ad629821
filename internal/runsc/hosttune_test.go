package runsc

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// dend advises expedited RCU grace periods on a cgroup v1 host without
// them, and says nothing otherwise.
func TestAdviseHost(t *testing.T) {
	for _, tc := range []struct {
		name      string
		v2        bool
		expedited string // "" when the file is missing
		advised   bool
	}{
		{"cgroup v1, not expedited", false, "0\n", true},
		{"cgroup v1, expedited", false, "1\n", false},
		{"cgroup v2", true, "0\n", false},
		{"no knob", false, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sysfs := t.TempDir()
			if err := os.MkdirAll(filepath.Join(sysfs, "fs/cgroup"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(filepath.Join(sysfs, "kernel"), 0o755); err != nil {
				t.Fatal(err)
			}
			if tc.v2 {
				os.WriteFile(filepath.Join(sysfs, "fs/cgroup/cgroup.controllers"), []byte("cpu memory pids\n"), 0o644)
			}
			if tc.expedited != "" {
				os.WriteFile(filepath.Join(sysfs, "kernel/rcu_expedited"), []byte(tc.expedited), 0o644)
			}
			var buf bytes.Buffer
			adviseHost(slog.New(slog.NewTextHandler(&buf, nil)), sysfs)
			if got := strings.Contains(buf.String(), "rcu_expedited"); got != tc.advised {
				t.Errorf("advised = %v, want %v; log: %q", got, tc.advised, buf.String())
			}
		})
	}
}
