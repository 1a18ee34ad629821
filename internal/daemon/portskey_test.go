package daemon

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/den-dev/den/internal/errdefs"
)

func TestPortsKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ports.key")
	key, err := loadPortsKey(path)
	if err != nil || len(key) != portsKeyBytes {
		t.Fatalf("first use: %x, %v", key, err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file %v, %v; want mode 0600", fi, err)
	}
	again, err := loadPortsKey(path)
	if err != nil || !bytes.Equal(again, key) {
		t.Fatalf("second use: %x, %v; want the same key", again, err)
	}
	if err := os.WriteFile(path, []byte("abcd\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadPortsKey(path); !errors.Is(err, errdefs.ErrInvalid) || errdefs.Hint(err) == "" {
		t.Errorf("a short key: %v, want invalid with a hint", err)
	}
}

func TestValidDomain(t *testing.T) {
	for d, want := range map[string]bool{
		"ports.example.com": true, "localhost": true, "a-1.b": true,
		"": false, "Ports.example.com": false, "-a.com": false, "a..b": false, ".a": false, "a.": false, "*.a.com": false, "a_b.com": false,
	} {
		if got := validDomain(d); got != want {
			t.Errorf("validDomain(%q) = %v, want %v", d, got, want)
		}
	}
}
