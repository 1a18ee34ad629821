package initd

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
)

// writeResolvConf makes /etc/resolv.conf (under the configured EtcDir)
// hold content, unless it already does: the host sends it on every boot,
// restore and claim, and reading a small file costs less than rewriting
// it. It replaces whatever is there, a symlink included (an image's link
// to a resolver den does not run), by renaming a new file over it, so
// no process ever reads half a file.
func (s *Server) writeResolvConf(content string) error {
	etc := s.cfg.EtcDir
	path := filepath.Join(etc, "resolv.conf")
	if fi, err := os.Lstat(path); err == nil && fi.Mode().IsRegular() {
		if b, err := os.ReadFile(path); err == nil && bytes.Equal(b, []byte(content)) {
			return nil
		}
	}
	if err := os.MkdirAll(etc, 0o755); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	tmp, err := os.CreateTemp(etc, ".resolv.conf-*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.WriteString(content)
	if err == nil {
		err = tmp.Chmod(0o644)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
