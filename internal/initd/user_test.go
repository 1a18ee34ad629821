package initd

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/den-dev/den/internal/errdefs"
)

func TestLookupAccount(t *testing.T) {
	etc := t.TempDir()
	os.WriteFile(filepath.Join(etc, "passwd"), []byte(`# comment
root:x:0:0:root:/root:/bin/sh
alice:x:1000:1000:Alice:/home/alice:/bin/sh
broken:x:notanumber:0::/:
`), 0o644)
	os.WriteFile(filepath.Join(etc, "group"), []byte(`root:x:0:
alice:x:1000:
dev:x:2000:bob,alice
ops:x:3000:bob
`), 0o644)
	tests := []struct {
		spec string
		want account
		err  error
	}{
		{"alice", account{uid: 1000, gid: 1000, groups: []uint32{1000, 2000}, name: "alice", home: "/home/alice"}, nil},
		{"1000", account{uid: 1000, gid: 1000, groups: []uint32{1000, 2000}, name: "alice", home: "/home/alice"}, nil},
		{"alice:ops", account{uid: 1000, gid: 3000, groups: []uint32{3000, 2000}, name: "alice", home: "/home/alice"}, nil},
		{"1000:77", account{uid: 1000, gid: 77, groups: []uint32{77, 2000}, name: "alice", home: "/home/alice"}, nil},
		{"5000", account{uid: 5000, gid: 0, groups: []uint32{0}, home: "/"}, nil},
		{"5000:5000", account{uid: 5000, gid: 5000, groups: []uint32{5000}, home: "/"}, nil},
		{"root", account{uid: 0, gid: 0, groups: []uint32{0}, name: "root", home: "/root"}, nil},
		{"bob", account{}, errdefs.ErrInvalid},
		{"alice:nogroup", account{}, errdefs.ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			got, err := lookupAccount(etc, tt.spec)
			if tt.err != nil {
				if !errors.Is(err, tt.err) {
					t.Fatalf("err = %v, want %v", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.uid != tt.want.uid || got.gid != tt.want.gid || got.name != tt.want.name ||
				got.home != tt.want.home || !slices.Equal(got.groups, tt.want.groups) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestLookupAccountWithoutFiles(t *testing.T) {
	got, err := lookupAccount(t.TempDir(), "0:0")
	if err != nil || got.uid != 0 || got.home != "/" {
		t.Fatalf("got %+v, %v", got, err)
	}
}
