package portproxy

import (
	"bytes"
	"cmp"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/expose"
	"github.com/den-dev/den/internal/httpapi/httpx"
)

var testPortsKey = bytes.Repeat([]byte{7}, 32)

func TestCheckPortSignature(t *testing.T) {
	s := New(Config{Key: testPortsKey})
	now := time.Unix(1_800_000_000, 0)
	exp := now.Add(time.Hour).Unix()
	ep := expose.Port{Port: 8080, LinkKey: "k1"}
	good := s.Sign("sb1", ep, exp)
	e := strconv.FormatInt(exp, 10)
	if err := s.checkPortSignature("sb1", ep, e, good, now); err != nil {
		t.Fatalf("a good signature: %v", err)
	}
	other := New(Config{Key: bytes.Repeat([]byte{8}, 32)})
	for _, tc := range []struct {
		name, id string
		port     uint16
		exp, sig string
		now      time.Time
		msg      string
		linkKey  string
	}{
		{name: "revoked", id: "sb1", port: 8080, exp: e, sig: good, now: now, msg: "does not match", linkKey: "k2"},
		{name: "another sandbox", id: "sb2", port: 8080, exp: e, sig: good, now: now, msg: "does not match"},
		{name: "another port", id: "sb1", port: 8081, exp: e, sig: good, now: now, msg: "does not match"},
		{name: "a later expiry", id: "sb1", port: 8080, exp: strconv.FormatInt(exp+3600, 10), sig: good, now: now, msg: "does not match"},
		{name: "another key", id: "sb1", port: 8080, exp: e, sig: other.Sign("sb1", ep, exp), now: now, msg: "does not match"},
		{name: "not base64", id: "sb1", port: 8080, exp: e, sig: "!!!", now: now, msg: "does not match"},
		{name: "truncated", id: "sb1", port: 8080, exp: e, sig: good[:20], now: now, msg: "does not match"},
		{name: "expired", id: "sb1", port: 8080, exp: e, sig: good, now: now.Add(time.Hour), msg: "expired at " + time.Unix(exp, 0).UTC().Format(time.RFC3339)},
		{name: "bad expiry", id: "sb1", port: 8080, exp: "tomorrow", sig: good, now: now, msg: "not a Unix time"},
		{name: "no expiry", id: "sb1", port: 8080, exp: "", sig: good, now: now, msg: "needs both"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := cmp.Or(tc.linkKey, ep.LinkKey)
			err := s.checkPortSignature(tc.id, expose.Port{Port: tc.port, LinkKey: key}, tc.exp, tc.sig, tc.now)
			if err == nil || !strings.Contains(err.Error(), tc.msg) || errdefs.Hint(err) == "" {
				t.Errorf("error %v (hint %q), want one saying %q with a hint", err, errdefs.Hint(err), tc.msg)
			}
			if status, _, _ := httpx.ToAPIError(err); status != http.StatusUnauthorized {
				t.Errorf("status %d, want 401", status)
			}
		})
	}
	if err := New(Config{}).checkPortSignature("sb1", ep, e, good, now); err == nil {
		t.Error("a dend without a key accepted a signature")
	}
}
