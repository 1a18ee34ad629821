package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/den-dev/den/internal/errdefs"
)

func TestStoreDSN(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "store")
	if err := os.WriteFile(file, []byte("postgres://den:s3cret@db/den\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DEN_STORE", "postgres://den:fromenv@db/den")
	for _, tc := range []struct {
		name, flag, file string
		want, err        string
	}{
		{name: "env", want: "postgres://den:fromenv@db/den"},
		{name: "file", file: file, want: "postgres://den:s3cret@db/den"},
		{name: "flag without password", flag: "postgres://den@db/den", want: "postgres://den@db/den"},
		{name: "flag with password", flag: "postgres://den:s3cret@db/den", err: "holds a password"},
		{name: "key=value with password", flag: "host=db password=s3cret", err: "holds a password"},
		{name: "both", flag: "postgres://den@db/den", file: file, err: "give one"},
		{name: "missing file", file: filepath.Join(dir, "nope"), err: "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := storeDSN(tc.flag, tc.file)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || strings.Contains(err.Error(), "s3cret") {
					t.Fatalf("storeDSN = %q, %v; want an error with %q and no password", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("storeDSN = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	_, err := storeDSN("postgres://den:s3cret@db/den", "")
	if !errors.Is(err, errdefs.ErrInvalid) || !strings.Contains(errdefs.Hint(err), "DEN_STORE") {
		t.Fatalf("refusal %v with hint %q, want invalid with a hint naming DEN_STORE", err, errdefs.Hint(err))
	}
}
