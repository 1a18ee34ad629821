package cli

import (
	"strings"
	"testing"
)

func TestCompareReleases(t *testing.T) {
	tests := []struct {
		a, b  string
		order int // sign
		ok    bool
	}{
		{"v0.1.0", "v0.2.0", -1, true},
		{"v0.10.0", "v0.9.3", 1, true},
		{"v1.0.0", "v0.99.99", 1, true},
		{"v0.1.0-3-gabc1234", "v0.1.0", 1, true},
		{"v0.1.0-3-gabc1234-dirty", "v0.1.0-12-gdef5678", -1, true},
		{"v0.2.0", "v0.1.0-40-gdef5678", 1, true},
		{"v0.1.0-3-gabc1234", "v0.1.0-3-gdef5678", 0, false}, // one count, two commits
		{"dev", "v0.1.0", 0, false},
		{"v0.1.0", "0b1879c", 0, false},
		{"v0.1", "v0.1.0", 0, false},
	}
	for _, tt := range tests {
		order, ok := compareReleases(tt.a, tt.b)
		if ok != tt.ok || sign(order) != tt.order {
			t.Errorf("compareReleases(%q, %q) = %d, %v; want sign %d, %v", tt.a, tt.b, order, ok, tt.order, tt.ok)
		}
	}
}

func sign(n int) int {
	switch {
	case n < 0:
		return -1
	case n > 0:
		return 1
	}
	return 0
}

func TestSkewWarningSaysWhichCalls(t *testing.T) {
	for _, tt := range []struct{ den, dend, want string }{
		{"v0.2.0", "v0.1.0", "calls added since v0.1.0 will fail until dend is upgraded"},
		{"v0.1.0", "v0.2.0", "this den lacks dend's calls added since v0.1.0; upgrade den"},
		{"dev", "v0.1.0", "install den and dend from one release"},
	} {
		got := skewWarning(tt.den, tt.dend)
		if !strings.HasPrefix(got, "den is "+tt.den+" but dend is "+tt.dend+": ") || !strings.HasSuffix(got, tt.want) {
			t.Errorf("skewWarning(%q, %q) = %q, want it to end %q", tt.den, tt.dend, got, tt.want)
		}
	}
}
