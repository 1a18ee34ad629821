package api

import (
	"testing"
	"time"
)

func TestFormatDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0:                             "0",
		90 * time.Second:              "1m30s",
		15 * time.Minute:              "15m",
		2 * time.Hour:                 "2h",
		90 * time.Minute:              "1h30m",
		2*time.Hour + 5*time.Second:   "2h0m5s",
		10 * time.Hour:                "10h",
		500 * time.Millisecond:        "500ms",
		-15 * time.Minute:             "-15m",
		24*time.Hour + 10*time.Minute: "24h10m",
	} {
		got := FormatDuration(d)
		if got != want {
			t.Errorf("FormatDuration(%v) = %q, want %q", d, got, want)
		}
		if back, err := time.ParseDuration(got); err != nil || back != d {
			t.Errorf("%q reads back as %v, %v", got, back, err)
		}
	}
}
