package memimage

import (
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sort"
)

// StateFile is the file of a memory image the engine writes its kernel
// state to; it is there and non-empty once the image is whole.
const StateFile = "checkpoint.img"

// File is one file of a memory image: its name in the image's directory,
// its size and its CRC-32C.
type File struct {
	Name   string
	Size   int64
	CRC32C uint32
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Sum lists the memory image in dir's regular files, by name, with their
// sums, and returns their total size.
func Sum(dir string) ([]File, int64, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, 0, fmt.Errorf("reading memory image: %w", err)
	}
	var files []File
	var total int64
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		sum, n, err := crcFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, 0, err
		}
		files = append(files, File{Name: e.Name(), Size: n, CRC32C: sum})
		total += n
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Name < files[j].Name })
	return files, total, nil
}

func crcFile(path string) (uint32, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, fmt.Errorf("reading memory image: %w", err)
	}
	defer f.Close()
	h := crc32.New(castagnoli)
	n, err := io.Copy(h, f)
	if err != nil {
		return 0, 0, fmt.Errorf("reading memory image: %w", err)
	}
	return h.Sum32(), n, nil
}

// Matches sums the memory image in dir again and says whether it is
// still want, the list Sum made of it; its error says the image could
// not be read.
func Matches(dir string, want []File) (bool, error) {
	files, _, err := Sum(dir)
	if err != nil {
		return false, err
	}
	return fmt.Sprint(files) == fmt.Sprint(want), nil
}
