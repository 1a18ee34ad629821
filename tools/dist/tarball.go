package main

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// writeTarball packs files into a gzipped tar at dst, below one
// directory named as the tarball is, each at its path on the host: the
// tree `make install` makes, to copy onto / (dend.env only where there
// is none). Owners are root and times are date, so a build of one
// commit packs the same bytes.
func writeTarball(dst string, date time.Time, files []file) error {
	top := strings.TrimSuffix(filepath.Base(dst), ".tar.gz")
	return writeFile(dst, func(out io.Writer) error {
		zw := gzip.NewWriter(out)
		zw.ModTime = date
		tw := tar.NewWriter(zw)
		dirs := map[string]bool{}
		for _, f := range files {
			for _, d := range parents(top + f.dst) {
				if !dirs[d] {
					dirs[d] = true
					hdr := &tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755, ModTime: date, Format: tar.FormatPAX}
					if err := tw.WriteHeader(hdr); err != nil {
						return fmt.Errorf("packing %s: %w", d, err)
					}
				}
			}
			if err := addFile(tw, top+f.dst, f, date); err != nil {
				return err
			}
		}
		if err := tw.Close(); err != nil {
			return fmt.Errorf("closing the tarball: %w", err)
		}
		return zw.Close()
	})
}

// writeFile writes dst whole or not at all: write fills a temporary file
// beside it, renamed to dst once written.
func writeFile(dst string, write func(io.Writer) error) (err error) {
	out, err := os.Create(dst + ".tmp")
	if err != nil {
		return fmt.Errorf("creating %s: %w", filepath.Base(dst), err)
	}
	defer func() {
		out.Close()
		if err != nil {
			os.Remove(dst + ".tmp")
		}
	}()
	if err := write(out); err != nil {
		return err
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", filepath.Base(dst), err)
	}
	return os.Rename(dst+".tmp", dst)
}

// parents lists p's directories, outermost first.
func parents(p string) []string {
	var ds []string
	for d := path.Dir(p); d != "." && d != "/"; d = path.Dir(d) {
		ds = append([]string{d}, ds...)
	}
	return ds
}

func addFile(tw *tar.Writer, name string, f file, date time.Time) error {
	in, err := os.Open(f.src)
	if err != nil {
		return fmt.Errorf("packing %s: %w", f.dst, err)
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return fmt.Errorf("packing %s: %w", f.dst, err)
	}
	hdr := &tar.Header{Typeflag: tar.TypeReg, Name: name, Size: st.Size(), Mode: int64(f.mode), ModTime: date, Format: tar.FormatPAX}
	if err := tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("packing %s: %w", f.dst, err)
	}
	if _, err := io.Copy(tw, in); err != nil {
		return fmt.Errorf("packing %s: %w", f.dst, err)
	}
	return nil
}

// writeSums writes the SHA-256 sums of paths into dst, as sha256sum
// prints them, so `sha256sum -c SHA256SUMS` checks a download.
func writeSums(dst string, paths ...string) error {
	sort.Strings(paths)
	var b strings.Builder
	for _, p := range paths {
		sum, err := sha256File(p)
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s  %s\n", sum, filepath.Base(p))
	}
	if err := os.WriteFile(dst, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", dst, err)
	}
	return nil
}

func sha256File(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", fmt.Errorf("summing %s: %w", p, err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("summing %s: %w", p, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
