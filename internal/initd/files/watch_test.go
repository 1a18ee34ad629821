package files

import (
	"bufio"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/den-dev/den/internal/guest"
)

// watchEvents watches dir through the Watch route and returns what it
// tells, one event per receive.
func watchEvents(t *testing.T, dir string) <-chan guest.WatchEvent {
	t.Helper()
	s := New(t.TempDir(), nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := s.Watch(w, r); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
		}
	}))
	t.Cleanup(srv.Close)
	resp, err := http.Get(srv.URL + "/?path=" + url.QueryEscape(dir))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("watch answered %s", resp.Status)
	}
	ch := make(chan guest.WatchEvent, 64)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			var ev guest.WatchEvent
			if json.Unmarshal(sc.Bytes(), &ev) == nil {
				ch <- ev
			}
		}
		close(ch)
	}()
	return ch
}

// until collects events until one matches last, or fails after a while.
func until(t *testing.T, ch <-chan guest.WatchEvent, last guest.WatchEvent) []guest.WatchEvent {
	t.Helper()
	var got []guest.WatchEvent
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatalf("the watch ended; it told %v", got)
			}
			got = append(got, ev)
			if ev == last {
				return got
			}
		case <-timeout:
			t.Fatalf("no %v within 10s; the watch told %v", last, got)
		}
	}
}

// A write renames a temporary file over its target; a watch tells what
// E2B's envd, writing in place, would: the target's creation when it is
// new, its chown and its write, never the temporary file.
func TestWatchTellsAWriteAsTheFilesOwn(t *testing.T) {
	dir := t.TempDir()
	ch := watchEvents(t, dir)
	target := filepath.Join(dir, "notes.txt")

	if err := writeAtomic(target, 0o644, nil, nil, nil, "", strings.NewReader("first")); err != nil {
		t.Fatal(err)
	}
	got := until(t, ch, guest.WatchEvent{Name: "notes.txt", Op: guest.WatchWrite})
	// E2B's envd: open(O_CREAT), chown, write.
	want := []guest.WatchEvent{{Name: "notes.txt", Op: guest.WatchCreate}, {Name: "notes.txt", Op: guest.WatchChmod}, {Name: "notes.txt", Op: guest.WatchWrite}}
	if !slices.Equal(got, want) {
		t.Errorf("a new file's write told %v, want %v", got, want)
	}

	fi, err := os.Stat(target)
	if err != nil {
		t.Fatal(err)
	}
	if err := writeAtomic(target, 0o644, fi.Sys().(*syscall.Stat_t), nil, nil, "", strings.NewReader("second")); err != nil {
		t.Fatal(err)
	}
	again := until(t, ch, guest.WatchEvent{Name: "notes.txt", Op: guest.WatchWrite})
	// E2B's envd: chown, open(O_TRUNC), write.
	if want := want[1:]; !slices.Equal(again, want) {
		t.Errorf("overwriting an existing file told %v, want %v", again, want)
	}
	for _, ev := range append(got, again...) {
		if strings.HasPrefix(ev.Name, tmpPrefix) {
			t.Errorf("the watch told the temporary file: %v", ev)
		}
	}
	if b, _ := os.ReadFile(target); string(b) != "second" {
		t.Errorf("the file holds %q", b)
	}
}

// A write keeps the attributes of the file it replaces but those it is
// told to drop (E2B's metadata, replaced by each write's).
func TestWriteDropsStaleXattrs(t *testing.T) {
	target := filepath.Join(t.TempDir(), "f")
	first := map[string]string{"user.e2b.author": "mish", "user.kept": "yes"}
	if err := writeAtomic(target, 0o644, nil, nil, first, "", strings.NewReader("first")); err != nil {
		if errors.Is(err, unix.ENOTSUP) {
			t.Skip("this file system has no user attributes")
		}
		t.Fatal(err)
	}
	fi, err := os.Stat(target)
	if err != nil {
		t.Fatal(err)
	}
	if err := writeAtomic(target, 0o644, fi.Sys().(*syscall.Stat_t), nil, nil, "user.e2b.", strings.NewReader("second")); err != nil {
		t.Fatal(err)
	}
	got := readXattrs(target)
	if want := map[string]string{"user.kept": "yes"}; !maps.Equal(got, want) {
		t.Errorf("after an overwrite dropping user.e2b.: %v, want %v", got, want)
	}
}
