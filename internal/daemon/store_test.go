package daemon

import (
	"strings"
	"testing"
)

func TestDSNPasswords(t *testing.T) {
	for _, tc := range []struct {
		dsn      string
		password bool
		redacted string
	}{
		{"postgres://den@db:5432/den", false, "postgres://den@db:5432/den"},
		{"postgres://den:s3cret@db:5432/den?sslmode=require", true, "postgres://den:xxxxx@db:5432/den?sslmode=require"},
		{"postgresql://db/den?user=den&password=s3cret", true, "postgresql://db/den?user=den&password=xxxxx"},
		{"host=db user=den dbname=den", false, "host=db user=den dbname=den"},
		{"host=db password=s3cret dbname=den", true, "host=db password=xxxxx dbname=den"},
		{"host=db password='s3 cret' dbname=den", true, "host=db password=xxxxx dbname=den"},
	} {
		t.Run(tc.dsn, func(t *testing.T) {
			if got := DSNHasPassword(tc.dsn); got != tc.password {
				t.Errorf("DSNHasPassword = %v, want %v", got, tc.password)
			}
			got := RedactDSN(tc.dsn)
			if got != tc.redacted || strings.Contains(got, "s3") {
				t.Errorf("RedactDSN = %q, want %q", got, tc.redacted)
			}
			if !IsPostgresDSN(tc.dsn) {
				t.Errorf("IsPostgresDSN = false")
			}
		})
	}
	for _, bad := range []string{"sqlite", "/var/lib/den/den.db", "mysql://x"} {
		if IsPostgresDSN(bad) {
			t.Errorf("IsPostgresDSN(%q) = true", bad)
		}
	}
}
