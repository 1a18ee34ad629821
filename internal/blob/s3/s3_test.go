package s3_test

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/den-dev/den/internal/blob"
	"github.com/den-dev/den/internal/blob/s3"
	"github.com/den-dev/den/internal/blob/s3/miniotest"
	"github.com/den-dev/den/internal/errdefs"
)

func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		url  string
		want s3.Location
		err  string
	}{
		{url: "s3://b/p/q?endpoint=127.0.0.1:9000&insecure=1&region=eu-1",
			want: s3.Location{Bucket: "b", Prefix: "p/q/", Endpoint: "127.0.0.1:9000", Insecure: true, Region: "eu-1"}},
		{url: "s3://b", want: s3.Location{Bucket: "b", Endpoint: "s3.amazonaws.com"}},
		{url: "s3://b/?endpoint=minio.internal", want: s3.Location{Bucket: "b", Endpoint: "minio.internal"}},
		{url: "http://b/p", err: "not an s3:// URL"},
		{url: "s3:///p", err: "names no bucket"},
		{url: "s3://key:secret@b/p", err: "holds credentials"},
		{url: "s3://b/p?endpoint=", err: "not HOST or HOST:PORT"},
		{url: "s3://b/p?endpoint=http://x:9000", err: "not HOST or HOST:PORT"},
		{url: "s3://b/p?endpoint=x:", err: "not HOST or HOST:PORT"},
		{url: "s3://b/p?insecure=maybe", err: "neither 1 nor 0"},
		{url: "s3://b/p?secret=x", err: "unknown parameter"},
		{url: "::", err: "not a URL"},
	} {
		t.Run(tc.url, func(t *testing.T) {
			got, err := s3.ParseURL(tc.url)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.Is(err, errdefs.ErrInvalid) {
					t.Fatalf("ParseURL = %+v, %v; want an invalid error with %q", got, err, tc.err)
				}
				if strings.Contains(err.Error(), "secret") && tc.err == "holds credentials" {
					t.Fatalf("the error repeats the secret: %v", err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseURL = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

// TestOpen starts MinIO and opens it right and wrong: every mistake is
// refused at once with words that say which.
func TestOpen(t *testing.T) {
	if testing.Short() {
		t.Skip("starts MinIO")
	}
	srv := miniotest.ForTest(t)
	ctx := t.Context()
	if err := srv.CreateBucket(ctx, "den"); err != nil {
		t.Fatal(err)
	}
	good := s3.Credentials{AccessKeyID: srv.AccessKey, SecretAccessKey: srv.SecretKey}
	loc := func(u string) s3.Location {
		l, err := s3.ParseURL(u)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	for _, tc := range []struct {
		name string
		loc  s3.Location
		cred s3.Credentials
		err  string
	}{
		{"wrong secret", loc(srv.URL("den", "x")), s3.Credentials{AccessKeyID: srv.AccessKey, SecretAccessKey: "wrong-secret-key"}, "refused dend's credentials"},
		{"unknown key", loc(srv.URL("den", "x")), s3.Credentials{AccessKeyID: "nobody", SecretAccessKey: "wrong-secret-key"}, "refused dend's credentials"},
		{"no credentials", loc(srv.URL("den", "x")), s3.Credentials{}, "credentials are not set"},
		{"no bucket", loc(srv.URL("missing", "x")), good, `bucket "missing" does not exist`},
		{"nothing listening", loc("s3://den/x?insecure=1&endpoint=" + closed), good, "the blob store cannot be reached"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			_, err := s3.Open(ctx, tc.loc, tc.cred, nil)
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("Open = %v; want an error with %q", err, tc.err)
			}
			// Only a server that does not answer is unreachable: dend
			// starts without it, and stops on the others.
			if unreachable := strings.Contains(tc.err, "cannot be reached"); errors.Is(err, s3.ErrUnreachable) != unreachable {
				t.Fatalf("Open = %v: unreachable %v, want %v", err, errors.Is(err, s3.ErrUnreachable), unreachable)
			}
			if tc.cred.SecretAccessKey != "" && strings.Contains(err.Error(), tc.cred.SecretAccessKey) {
				t.Fatalf("the error shows the secret: %v", err)
			}
			t.Logf("%v (after %v)", err, time.Since(start).Round(time.Millisecond))
		})
	}
	b, err := s3.Open(ctx, loc(srv.URL("den", "x")), good, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Nothing is left behind by the probe.
	n := 0
	b.List(ctx, "", func(blob.ObjectInfo) error { n++; return nil })
	if n != 0 {
		t.Fatalf("Open left %d objects", n)
	}
	if err := b.Touch(ctx, "nothing"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("Touch of a missing object = %v; want not found", err)
	}
}
