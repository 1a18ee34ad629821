package services

import (
	"slices"
	"testing"
)

func TestParseHarnessService(t *testing.T) {
	sp, err := parseHarnessService("agent=python3 -m http.server 8080")
	if err != nil {
		t.Fatal(err)
	}
	if sp.Name != "agent" || !slices.Equal(sp.Argv, []string{"/bin/sh", "-c", "python3 -m http.server 8080"}) {
		t.Errorf("parsed %+v", sp)
	}
	for _, bad := range []string{"agent", "=cmd", "agent=", "agent=  "} {
		if _, err := parseHarnessService(bad); err == nil {
			t.Errorf("parseHarnessService(%q) = nil error, want one", bad)
		}
	}
}
