package imagecrypt

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/den-dev/den/internal/errdefs"
)

// A directory sealed and opened comes back the same; the key file is made
// on first use, 0600; another key file is refused with both ids, and so is
// sealing new images while old ones name another key.
func TestSealDir(t *testing.T) {
	base := t.TempDir()
	scratch := "/dev/shm/den-imagecrypt-test-" + filepath.Base(base)
	t.Cleanup(func() { os.RemoveAll(scratch) })
	keyFile := filepath.Join(base, "images.key")
	s, err := New(Config{KeyFile: keyFile, Scratch: scratch})
	if err != nil {
		t.Fatal(err)
	}
	plain, err := s.Scratch("ck1")
	if err != nil {
		t.Skipf("no tmpfs scratch: %v", err)
	}
	files := map[string][]byte{"checkpoint.img": []byte("state SECRET-VALUE"), "pages.img": bytes.Repeat([]byte("SECRET-VALUE"), 100000)}
	for n, b := range files {
		os.WriteFile(filepath.Join(plain, n), b, 0o600)
	}
	dst := filepath.Join(base, "ck1")
	os.Mkdir(dst, 0o700)
	id, err := s.SealDir(plain, dst, "checkpoint.img")
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(keyFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v, %v", fi, err)
	}
	if _, err := os.Stat(plain); !os.IsNotExist(err) {
		t.Errorf("the plaintext is still there: %v", err)
	}
	for n := range files {
		b, _ := os.ReadFile(filepath.Join(dst, n))
		if bytes.Contains(b, []byte("SECRET-VALUE")) || len(b) == 0 {
			t.Errorf("%s is not sealed", n)
		}
	}
	back, _ := s.Scratch("restore")
	if err := s.OpenDir(dst, back, id); err != nil {
		t.Fatal(err)
	}
	for n, want := range files {
		if b, _ := os.ReadFile(filepath.Join(back, n)); !bytes.Equal(b, want) {
			t.Errorf("%s came back changed", n)
		}
	}

	// Another key file: images are refused, and no new one is sealed.
	os.Remove(keyFile)
	s2, err := New(Config{KeyFile: keyFile, Scratch: scratch})
	if err != nil {
		t.Fatal(err)
	}
	s2.Expect([]string{id})
	back2, _ := s2.Scratch("restore")
	var wk *WrongKeyError
	if err := s2.OpenDir(dst, back2, id); !errors.As(err, &wk) || errdefs.Hint(err) == "" {
		t.Errorf("opening without the key: %v", err)
	}
	p2, _ := s2.Scratch("ck2")
	if _, err := s2.SealDir(p2, t.TempDir(), ""); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Errorf("sealing while images name another key: %v", err)
	}
	if _, err := os.Stat(keyFile); !os.IsNotExist(err) {
		t.Errorf("a refused seal made a key file")
	}
}
