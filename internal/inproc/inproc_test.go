package inproc

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/den-dev/den/api"
)

// Each end reaches its own handler, the token travels as a bearer token,
// and once closed the API refuses connections.
func TestEnds(t *testing.T) {
	self := New()
	answer := func(who string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			json.NewEncoder(w).Encode(api.Health{Status: who, Version: r.Header.Get("Authorization")})
		})
	}
	self.Serve(answer("root"), answer("token"))
	ctx := context.Background()
	for _, c := range []struct {
		rt          http.RoundTripper
		token, want string
		auth        string
	}{
		{self.RootTransport(), "", "root", ""},
		{self.TokenTransport(), "den_x", "token", "Bearer den_x"},
	} {
		cl, err := Client(c.rt, "http://127.0.0.1:7070", c.token, "test")
		if err != nil {
			t.Fatal(err)
		}
		h, err := cl.Health(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if h.Status != c.want || h.Version != c.auth {
			t.Errorf("%s end: %+v", c.want, h)
		}
	}
	self.Close()
	cl, _ := Client(self.RootTransport(), "", "", "test")
	if _, err := cl.Health(ctx); err == nil {
		t.Error("a closed API answered")
	}
}
