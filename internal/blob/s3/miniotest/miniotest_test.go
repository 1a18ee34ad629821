package miniotest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"
)

// A server StartIn was given a directory keeps what it stored and its log
// there, through a kill and a restart, and Stop leaves them.
func TestStartInKeepsDir(t *testing.T) {
	ctx := t.Context()
	dir := filepath.Join(t.TempDir(), "minio")
	s, err := StartIn(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	if err := s.CreateBucket(ctx, "bkt"); err != nil {
		t.Fatal(err)
	}
	c, err := s.Client()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutObject(ctx, "bkt", "k", strings.NewReader("v"), 1, minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	s.Kill()
	if err := s.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.StatObject(ctx, "bkt", "k", minio.StatObjectOptions{}); err != nil {
		t.Errorf("after a kill and restart: %v", err)
	}
	creds := filepath.Join(dir, "credentials")
	if err := s.WriteCredentials(creds); err != nil {
		t.Fatal(err)
	}
	want := "AWS_ACCESS_KEY_ID=" + s.AccessKey + "\nAWS_SECRET_ACCESS_KEY=" + s.SecretKey + "\n"
	if b, err := os.ReadFile(creds); err != nil || string(b) != want {
		t.Errorf("credentials file: %q, %v; want %q", b, err, want)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"server.log", "data/bkt"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			t.Errorf("after Stop, %s of the directory: %v", p, err)
		}
	}
}

// Start's temporary directory goes at Stop.
func TestStartDirGoes(t *testing.T) {
	s, err := Start(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	dir := s.dir
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("after Stop, the temporary directory %s: %v, want it gone", dir, err)
	}
}
