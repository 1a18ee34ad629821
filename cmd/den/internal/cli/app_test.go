package cli

import (
	"bytes"
	"errors"
	"testing"
)

// EachDone prints each name its verb did, one a line, and nothing under
// --json; a name that failed is not printed, and is counted.
func TestEachDone(t *testing.T) {
	for _, json := range []bool{false, true} {
		var out, errs bytes.Buffer
		a := &App{Stdout: &out, Stderr: &errs, JSON: json}
		err := a.EachDone([]string{"a", "bad", "c"}, func(n string) error {
			if n == "bad" {
				return errors.New("no such thing")
			}
			return nil
		})
		if err == nil || err.Error() != "1 of 3 failed" {
			t.Errorf("json=%v: err %v, want 1 of 3 failed", json, err)
		}
		want := "a\nc\n"
		if json {
			want = ""
		}
		if out.String() != want {
			t.Errorf("json=%v: printed %q, want %q", json, out.String(), want)
		}
		if errs.String() != "den: bad: no such thing\n" {
			t.Errorf("json=%v: stderr %q", json, errs.String())
		}
	}
}
