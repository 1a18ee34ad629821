package memimage

import (
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"
)

// An image's regular files are listed by name with their size and
// CRC-32C; the list matches the image until a byte of it changes, and an
// image that is gone cannot be read.
func TestSumAndMatches(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ck")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	content := map[string]string{"pages.img": "pages", StateFile: "kernel state"}
	for name, data := range content {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "not-a-file"), 0o700); err != nil {
		t.Fatal(err)
	}
	files, total, err := Sum(dir)
	if err != nil {
		t.Fatalf("summing an image: %v", err)
	}
	table := crc32.MakeTable(crc32.Castagnoli)
	want := []File{
		{Name: StateFile, Size: 12, CRC32C: crc32.Checksum([]byte("kernel state"), table)},
		{Name: "pages.img", Size: 5, CRC32C: crc32.Checksum([]byte("pages"), table)},
	}
	if len(files) != len(want) || files[0] != want[0] || files[1] != want[1] {
		t.Fatalf("files %v, want %v", files, want)
	}
	if total != 17 {
		t.Fatalf("total %d, want 17", total)
	}
	if ok, err := Matches(dir, want); err != nil || !ok {
		t.Fatalf("an untouched image: match %v, err %v; want a match", ok, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pages.img"), []byte("Pages"), 0o600); err != nil {
		t.Fatal(err)
	}
	if ok, err := Matches(dir, want); err != nil || ok {
		t.Fatalf("a damaged image: match %v, err %v; want a mismatch", ok, err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := Matches(dir, want); err == nil {
		t.Fatal("a missing image could be read")
	}
}
