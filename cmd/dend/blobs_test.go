package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestBlobsKeys(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good", "# den's bucket\nAWS_ACCESS_KEY_ID=id1\nexport AWS_SECRET_ACCESS_KEY=\"s3cret\"\n")
	half := write("half", "AWS_ACCESS_KEY_ID=id1\n")
	odd := write("odd", "AWS_ACCESS_KEY_ID=id1\nPASSWORD=x\n")
	envs := map[string]string{"AWS_ACCESS_KEY_ID": "aws-id", "AWS_SECRET_ACCESS_KEY": "aws-secret"}
	denEnvs := map[string]string{"AWS_ACCESS_KEY_ID": "aws-id", "AWS_SECRET_ACCESS_KEY": "aws-secret",
		"DEN_BLOBS_ACCESS_KEY_ID": "den-id", "DEN_BLOBS_SECRET_ACCESS_KEY": "den-secret"}
	for _, tc := range []struct {
		name       string
		file       string
		env        map[string]string
		id, secret string
		err        string
	}{
		{name: "file first", file: good, env: denEnvs, id: "id1", secret: "s3cret"},
		{name: "DEN_BLOBS_ before AWS_", env: denEnvs, id: "den-id", secret: "den-secret"},
		{name: "AWS_", env: envs, id: "aws-id", secret: "aws-secret"},
		{name: "none", env: nil},
		{name: "file with one key", file: half, err: "must set both"},
		{name: "file with other keys", file: odd, err: `sets "PASSWORD"`},
		{name: "missing file", file: filepath.Join(dir, "none"), err: "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, secret, err := blobsKeys(tc.file, func(k string) string { return tc.env[k] })
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("blobsKeys = %q, %q, %v; want an error with %q", id, secret, err, tc.err)
				}
				return
			}
			if err != nil || id != tc.id || secret != tc.secret {
				t.Fatalf("blobsKeys = %q, %q, %v; want %q, %q", id, secret, err, tc.id, tc.secret)
			}
		})
	}
}
