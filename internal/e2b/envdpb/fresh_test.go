package envdpb

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

var generated = []string{
	"process/process.pb.go",
	"process/processconnect/process.connect.go",
	"filesystem/filesystem.pb.go",
	"filesystem/filesystemconnect/filesystem.connect.go",
}

// TestGeneratedIsFresh fails when a .proto file changed and the Go code
// was not generated again: always by the digests generate.sh records,
// and, where protoc and its plugins are installed, by generating anew and
// comparing.
func TestGeneratedIsFresh(t *testing.T) {
	recorded, err := os.ReadFile("protos.sha256")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(recorded)), "\n") {
		sum, file, ok := strings.Cut(line, "  ")
		if !ok {
			t.Fatalf("protos.sha256: bad line %q", line)
		}
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprintf("%x", sha256.Sum256(b)); got != sum {
			t.Errorf("%s changed since the code was generated: run `go generate ./internal/e2b/envdpb/`", file)
		}
	}

	gopath, _ := exec.Command("go", "env", "GOPATH").Output()
	bin := filepath.Join(strings.TrimSpace(string(gopath)), "bin")
	for _, tool := range []string{"protoc", filepath.Join(bin, "protoc-gen-go"), filepath.Join(bin, "protoc-gen-connect-go")} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed: compared the digests only", filepath.Base(tool))
		}
	}
	out := t.TempDir()
	cmd := exec.Command("./generate.sh")
	cmd.Env = append(os.Environ(), "OUT="+out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("generate.sh: %v\n%s", err, b)
	}
	for _, f := range generated {
		want, err := os.ReadFile(filepath.Join(out, f))
		if err != nil {
			t.Fatal(err)
		}
		have, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(have, want) {
			t.Errorf("%s is stale: run `go generate ./internal/e2b/envdpb/`", f)
		}
	}
}
