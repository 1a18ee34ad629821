package storage

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/den-dev/den/internal/sandbox"
)

// PoolUsage is how full a pool is.
type PoolUsage = sandbox.PoolUsage

// StatPool reads how full the filesystem holding dir is: its size, what
// is used, and what is still free to write.
func StatPool(dir string) (PoolUsage, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return PoolUsage{}, fmt.Errorf("reading the pool's free space: %w", err)
	}
	bs := int64(st.Bsize)
	return PoolUsage{
		Size: int64(st.Blocks) * bs,
		Used: int64(st.Blocks-st.Bfree) * bs,
		Free: int64(st.Bavail) * bs,
	}, nil
}
