package daemon

import (
	"bufio"
	"strings"
	"testing"
)

func TestWarmDefaults(t *testing.T) {
	for _, c := range []struct {
		in   string
		want map[string]int
		bad  bool
	}{
		{in: "", want: map[string]int{}},
		{in: "busybox=4", want: map[string]int{"busybox": 4}},
		{in: " busybox=4, debian=0 ,", want: map[string]int{"busybox": 4, "debian": 0}},
		{in: "busybox", bad: true},
		{in: "busybox=-1", bad: true},
		{in: "busybox=65", bad: true},
		{in: "Bad_Name=1", bad: true},
	} {
		cfg := Config{Warm: c.in}
		got, err := cfg.WarmDefaults()
		if c.bad {
			if err == nil {
				t.Errorf("%q: accepted as %v", c.in, got)
			}
			continue
		}
		if err != nil || len(got) != len(c.want) {
			t.Errorf("%q: %v, %v; want %v", c.in, got, err, c.want)
			continue
		}
		for k, v := range c.want {
			if got[k] != v {
				t.Errorf("%q: %s=%d, want %d", c.in, k, got[k], v)
			}
		}
	}
}

func TestParseMeminfo(t *testing.T) {
	in := "MemTotal:       24684020 kB\nMemFree:        13444500 kB\nMemAvailable:   23607336 kB\n"
	m, err := parseMeminfo(bufio.NewScanner(strings.NewReader(in)))
	if err != nil || m.TotalBytes != 24684020<<10 || m.AvailableBytes != 23607336<<10 {
		t.Fatalf("parseMeminfo = %+v, %v", m, err)
	}
	if _, err := parseMeminfo(bufio.NewScanner(strings.NewReader("MemFree: 1 kB\n"))); err == nil {
		t.Fatal("no MemTotal: want an error")
	}
}
