package expose

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/den-dev/den/internal/errdefs"
	"github.com/den-dev/den/internal/guest"
)

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		port uint16
		ok   bool
	}{
		{0, false},
		{guest.Port, false},
		{1, true},
		{8080, true},
		{65535, true},
	} {
		err := Validate(tc.port)
		if (err == nil) != tc.ok {
			t.Errorf("Validate(%d) = %v, want ok %v", tc.port, err, tc.ok)
		}
		if err != nil && (!errors.Is(err, errdefs.ErrInvalid) || errdefs.Hint(err) == "") {
			t.Errorf("Validate(%d) = %v (hint %q), want ErrInvalid with a hint", tc.port, err, errdefs.Hint(err))
		}
	}
}

func TestNotExposed(t *testing.T) {
	err := NotExposed("web", 8080)
	if !errors.Is(err, errdefs.ErrNotFound) || errdefs.Hint(err) != "expose it first: `den port expose web 8080`" {
		t.Errorf("NotExposed = %v (hint %q)", err, errdefs.Hint(err))
	}
	if got, want := err.Error(), `port 8080 of sandbox "web" is not exposed`; !strings.Contains(got, want) {
		t.Errorf("message %q, want it to say %q", got, want)
	}
}

// keys hands out link keys k1, k2, ... and counts them.
type keys struct{ n int }

func (k *keys) next() string {
	k.n++
	return "k" + string(rune('0'+k.n))
}

func TestWith(t *testing.T) {
	var k keys
	ports, msg, err := With("web", nil, 8080, false, k.next)
	if err != nil || msg != "exposed port 8080 (private)" {
		t.Fatalf("With 8080: %q, %v", msg, err)
	}
	before := slices.Clone(ports)
	ports2, msg, err := With("web", ports, 3000, true, k.next)
	if err != nil || msg != "exposed port 3000 (public)" {
		t.Fatalf("With 3000: %q, %v", msg, err)
	}
	if !slices.Equal(ports, before) {
		t.Errorf("With changed the ports it was given: %+v, was %+v", ports, before)
	}
	want := []Port{{Port: 3000, Public: true, LinkKey: "k2"}, {Port: 8080, LinkKey: "k1"}}
	if !slices.Equal(ports2, want) {
		t.Fatalf("ports %+v, want %+v (sorted, a key each)", ports2, want)
	}
	// The same again: nothing changes, no key is made.
	same, msg, err := With("web", ports2, 3000, true, k.next)
	if err != nil || msg != "" || !slices.Equal(same, ports2) || k.n != 2 {
		t.Fatalf("exposing again alike: %+v, %q, %v, %d keys", same, msg, err, k.n)
	}
	// Private now: the key stays.
	ports3, msg, err := With("web", ports2, 3000, false, k.next)
	if err != nil || msg != "port 3000 made private" {
		t.Fatalf("making 3000 private: %q, %v", msg, err)
	}
	if p, ok := Find(ports3, 3000); !ok || p.Public || p.LinkKey != "k2" || k.n != 2 {
		t.Fatalf("port 3000 after making it private: %+v %v", p, ok)
	}
}

func TestWithAtTheLimit(t *testing.T) {
	var ports []Port
	for i := range Max {
		ports = append(ports, Port{Port: uint16(1000 + i)})
	}
	_, _, err := With("web", ports, 9999, false, func() string { return "k" })
	if !errors.Is(err, errdefs.ErrTooLarge) || errdefs.Hint(err) == "" {
		t.Errorf("port %d: %v (hint %q), want too large with a hint", Max+1, err, errdefs.Hint(err))
	}
	// Changing one already exposed is still allowed at the limit.
	next, _, err := With("web", ports, 1000, true, func() string { return "k" })
	if err != nil || len(next) != Max {
		t.Errorf("making an exposed port public at the limit: %d ports, %v", len(next), err)
	}
}

func TestWithoutAndRevoked(t *testing.T) {
	ports := []Port{{Port: 3000, LinkKey: "a"}, {Port: 8080, LinkKey: "b"}}
	revoked := Revoked(slices.Clone(ports), 3000, "c")
	if want := []Port{{Port: 3000, LinkKey: "c"}, {Port: 8080, LinkKey: "b"}}; !slices.Equal(revoked, want) {
		t.Errorf("Revoked = %+v, want %+v", revoked, want)
	}
	left := Without(slices.Clone(ports), 3000)
	if want := []Port{{Port: 8080, LinkKey: "b"}}; !slices.Equal(left, want) {
		t.Errorf("Without 3000 = %+v, want %+v", left, want)
	}
	if none := Without(left, 8080); none != nil {
		t.Errorf("Without the last port = %+v, want nil", none)
	}
	if _, ok := Find(ports, 9999); ok {
		t.Error("Find found a port not exposed")
	}
}
