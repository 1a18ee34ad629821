package daemon

import (
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
)

// ImagesKeyFile is where the key sealing the memory images of sandboxes
// ever granted secrets lives: apart from the images, like secrets.key.
func (c *Config) ImagesKeyFile() string { return filepath.Join(c.DataDir, "images.key") }

// ImagesScratch is the directory in memory (a tmpfs) where plaintext
// memory images live while the engine writes or reads them: one per data
// directory, so several dends on a host keep apart.
func (c *Config) ImagesScratch() string {
	sum := sha256.Sum256([]byte(c.DataDir))
	return filepath.Join("/dev/shm", "den-images-"+hex.EncodeToString(sum[:6]))
}
