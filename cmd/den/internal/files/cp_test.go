package files

import (
	"github.com/den-dev/den/cmd/den/internal/cli"

	"errors"
	"testing"
)

func TestParseCpArgs(t *testing.T) {
	tests := []struct {
		src, dst  string
		from, to  location
		wantUsage string // "" when valid
	}{
		{src: "./app", dst: "web:/srv/app", from: location{path: "./app"}, to: location{sandbox: "web", path: "/srv/app"}},
		{src: "web:/var/log/x.log", dst: ".", from: location{sandbox: "web", path: "/var/log/x.log"}, to: location{path: "."}},
		{src: "/abs/file", dst: "box-1:/", from: location{path: "/abs/file"}, to: location{sandbox: "box-1", path: "/"}},
		{src: "notes.txt", dst: "web:/root/", from: location{path: "notes.txt"}, to: location{sandbox: "web", path: "/root/"}},
		{src: "-", dst: "web:/srv", from: location{path: "-"}, to: location{sandbox: "web", path: "/srv"}},
		// A colon after a slash is part of a local name.
		{src: "dir/a:b", dst: "web:/tmp", from: location{path: "dir/a:b"}, to: location{sandbox: "web", path: "/tmp"}},
		{src: "./a:b", dst: "web:/tmp", from: location{path: "./a:b"}, to: location{sandbox: "web", path: "/tmp"}},

		{src: "web:/a", dst: "db:/b", wantUsage: `cannot copy between two sandboxes (web:/a and db:/b)`},
		{src: "a", dst: "b", wantUsage: `neither "a" nor "b" is a sandbox path (NAME:/path)`},
		{src: "./a", dst: "/b", wantUsage: `neither "./a" nor "/b" is a sandbox path (NAME:/path)`},
		{src: "web:", dst: ".", wantUsage: `missing the path after "web:"`},
		{src: ":/x", dst: ".", wantUsage: `missing the sandbox name before the colon in ":/x"`},
		{src: "web:relative/p", dst: ".", wantUsage: `the path inside the sandbox must be absolute: "web:relative/p"`},
		{src: "", dst: "web:/x", wantUsage: "empty path"},
	}
	for _, tt := range tests {
		t.Run(tt.src+" "+tt.dst, func(t *testing.T) {
			from, to, err := parseCpArgs(tt.src, tt.dst)
			if tt.wantUsage != "" {
				var ue *cli.UsageError
				if !errors.As(err, &ue) || ue.Error() != tt.wantUsage || cli.HintOf(err) == "" {
					t.Fatalf("err = %v, want the usage error %q with a hint", err, tt.wantUsage)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error %v", err)
			}
			if from != tt.from || to != tt.to {
				t.Errorf("got %+v -> %+v, want %+v -> %+v", from, to, tt.from, tt.to)
			}
		})
	}
}

func TestContentsOnly(t *testing.T) {
	for p, want := range map[string]bool{"dir/.": true, ".": true, "/srv/app/.": true, "dir": false, "dir/": false, "./dir": false} {
		if got := contentsOnly(p); got != want {
			t.Errorf("contentsOnly(%q) = %v", p, got)
		}
	}
}
