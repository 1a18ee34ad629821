package users

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
		want Account
		err  error
	}{
		{"alice", Account{UID: 1000, GID: 1000, Groups: []uint32{1000, 2000}, Name: "alice", Home: "/home/alice"}, nil},
		{"1000", Account{UID: 1000, GID: 1000, Groups: []uint32{1000, 2000}, Name: "alice", Home: "/home/alice"}, nil},
		{"alice:ops", Account{UID: 1000, GID: 3000, Groups: []uint32{3000, 2000}, Name: "alice", Home: "/home/alice"}, nil},
		{"1000:77", Account{UID: 1000, GID: 77, Groups: []uint32{77, 2000}, Name: "alice", Home: "/home/alice"}, nil},
		{"5000", Account{UID: 5000, GID: 0, Groups: []uint32{0}, Home: "/"}, nil},
		{"5000:5000", Account{UID: 5000, GID: 5000, Groups: []uint32{5000}, Home: "/"}, nil},
		{"root", Account{UID: 0, GID: 0, Groups: []uint32{0}, Name: "root", Home: "/root"}, nil},
		{"bob", Account{}, errdefs.ErrInvalid},
		{"alice:nogroup", Account{}, errdefs.ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			got, err := Lookup(etc, tt.spec)
			if tt.err != nil {
				if !errors.Is(err, tt.err) {
					t.Fatalf("err = %v, want %v", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.UID != tt.want.UID || got.GID != tt.want.GID || got.Name != tt.want.Name ||
				got.Home != tt.want.Home || !slices.Equal(got.Groups, tt.want.Groups) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestLookupAccountWithoutFiles(t *testing.T) {
	got, err := Lookup(t.TempDir(), "0:0")
	if err != nil || got.UID != 0 || got.Home != "/" {
		t.Fatalf("got %+v, %v", got, err)
	}
}
