package memimage

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// StartSync starts writing the memory image in dir to disk, its files
// and its directory's entry, which the engine leaves in the page cache.
// The returned function waits for it and returns its error, the same to
// every call.
func StartSync(dir string) (wait func() error) {
	done := make(chan struct{})
	var err error
	go func() {
		defer close(done)
		err = Sync(dir)
	}()
	return func() error {
		<-done
		return err
	}
}

// Sync fsyncs the regular files in dir, dir, and dir's parent, which
// holds dir's entry.
func Sync(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("writing the memory image to disk: %w", err)
	}
	paths := []string{}
	for _, e := range ents {
		if e.Type().IsRegular() {
			paths = append(paths, filepath.Join(dir, e.Name()))
		}
	}
	for _, p := range append(paths, dir, filepath.Dir(dir)) {
		f, err := os.Open(p)
		if err == nil {
			err = f.Sync()
			f.Close()
		}
		if err != nil {
			return fmt.Errorf("writing the memory image to disk: %w", err)
		}
	}
	return nil
}

// writeBehindEvery is how often WriteBehind starts writing out what the
// engine wrote since.
const writeBehindEvery = 20 * time.Millisecond

// WriteBehind starts writing the files the engine writes into dir out to
// disk while it writes them, until the returned function is called, so
// that the sync that makes a memory image durable (Sync) finds little
// left to write. The page cache would otherwise hold a large image whole
// until that sync: the kernel starts writing only far above an image's
// size. It only starts writes and waits for none; errors are left to the
// sync. A dir not there yet is no error: it is looked for again.
func WriteBehind(dir string) (stop func()) {
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		files := map[string]*os.File{}
		defer func() {
			for _, f := range files {
				f.Close()
			}
		}()
		tick := time.NewTicker(writeBehindEvery)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			ents, _ := os.ReadDir(dir)
			for _, e := range ents {
				if !e.Type().IsRegular() {
					continue
				}
				f := files[e.Name()]
				if f == nil {
					var err error
					if f, err = os.Open(filepath.Join(dir, e.Name())); err != nil {
						continue
					}
					files[e.Name()] = f
				}
				_ = unix.SyncFileRange(int(f.Fd()), 0, 0, unix.SYNC_FILE_RANGE_WRITE)
			}
		}
	}()
	return func() {
		close(done)
		<-stopped
	}
}
