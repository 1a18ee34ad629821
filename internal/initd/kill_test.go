package initd

import (
	"os"
	"testing"
)

func TestParseStat(t *testing.T) {
	tests := []struct {
		line string
		want procEntry
		ok   bool
	}{
		{"42 (sleep) S 1 42 42 0 -1", procEntry{pid: 42, ppid: 1, pgrp: 42, session: 42}, true},
		{"42 (a b) c) (d) Z 7 8 9 0", procEntry{pid: 42, ppid: 7, pgrp: 8, session: 9, zombie: true}, true},
		{"42 (sleep) S 1 42 42 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 7713 2396160 200", procEntry{pid: 42, ppid: 1, pgrp: 42, session: 42, start: 7713}, true},
		{"42 (x S 1 2 3", procEntry{}, false},
		{"42 (x) S 1", procEntry{}, false},
	}
	for _, tt := range tests {
		got, ok := parseStat(42, tt.line)
		if ok != tt.ok || got != tt.want {
			t.Errorf("parseStat(%q) = %+v, %v; want %+v, %v", tt.line, got, ok, tt.want, tt.ok)
		}
	}
}

func TestReadProcTableFindsSelf(t *testing.T) {
	for _, pe := range readProcTable() {
		if pe.pid == os.Getpid() {
			if pe.ppid != os.Getppid() {
				t.Fatalf("ppid %d, want %d", pe.ppid, os.Getppid())
			}
			return
		}
	}
	t.Fatal("this process is not in the table")
}
