package grant

import (
	"bytes"
	"testing"

	"github.com/den-dev/den/internal/guest"
)

func TestMask(t *testing.T) {
	secrets := [][]byte{[]byte("hunter22"), []byte("abcd")}
	in := []byte("pw=hunter22 and hunter22, abcdabcd!")
	got := mask(in, secrets)
	if want := "pw=******** and ********, ********!"; string(got) != want {
		t.Fatalf("mask = %q, want %q", got, want)
	}
	if string(in) != "pw=hunter22 and hunter22, abcdabcd!" {
		t.Fatal("mask changed its input in place")
	}
	plain := []byte("nothing here")
	if got := mask(plain, secrets); &got[0] != &plain[0] {
		t.Fatal("mask copied output without secrets")
	}
	if r := redactions(nil); r != nil {
		t.Fatalf("redactions of none: %v", r)
	}
}

// A value written in pieces, split anywhere, is masked all the same; the
// offsets stay true; an unfinished beginning at the end is passed on.
func TestMaskerAcrossWrites(t *testing.T) {
	secret := "hunter22"
	text := "a=hunter22; b=hunhunter22 c=hunte"
	want := "a=********; b=hun******** c=hunte"
	for cut1 := 0; cut1 <= len(text); cut1++ {
		for cut2 := cut1; cut2 <= len(text); cut2++ {
			m := NewMasker([]guest.Secret{{Value: []byte(secret)}, {Value: []byte("xyz")}}) // too short to mask
			var got []byte
			for _, piece := range []string{text[:cut1], text[cut1:cut2], text[cut2:]} {
				got = append(got, m.Mask(0, []byte(piece))...)
			}
			got = append(got, m.Flush(0)...)
			if string(got) != want {
				t.Fatalf("pieces cut at %d and %d: %q, want %q", cut1, cut2, got, want)
			}
		}
	}
	// The streams are separate, and a restarted stream forgets what was
	// held back (it comes again).
	m := NewMasker([]guest.Secret{{Value: []byte(secret)}})
	if got := m.Mask(0, []byte("x hun")); string(got) != "x " {
		t.Fatalf("held back nothing: %q", got)
	}
	if got := m.Mask(1, []byte("ter22")); string(got) != "ter22" {
		t.Fatalf("stderr finished stdout's value: %q", got)
	}
	m.Reset()
	if got := m.Mask(0, []byte("hunter22!")); string(got) != "********!" {
		t.Fatalf("after reset: %q", got)
	}
	if m := NewMasker(nil); m != nil || string(m.Mask(0, []byte("as is"))) != "as is" || m.Flush(0) != nil {
		t.Fatal("a run without secrets is not passed through")
	}
}

// However output is cut into writes, the masked stream is as long as the
// output, holds no value, and equals masking the whole at once.
func FuzzMasker(f *testing.F) {
	f.Add([]byte("a=hunter22; b=hunhunter22 c=hunte"), []byte("hunter22"), uint16(7), uint16(19))
	f.Add([]byte("aaaaaaaaaa"), []byte("aaab"), uint16(3), uint16(3))
	f.Fuzz(func(t *testing.T, text, secret []byte, cut1, cut2 uint16) {
		if len(secret) < minRedact || len(secret) > 64 || len(text) > 4096 {
			return
		}
		c1, c2 := int(cut1)%(len(text)+1), int(cut2)%(len(text)+1)
		if c1 > c2 {
			c1, c2 = c2, c1
		}
		m := NewMasker([]guest.Secret{{Value: secret}})
		var got []byte
		for _, piece := range [][]byte{text[:c1], text[c1:c2], text[c2:]} {
			got = append(got, m.Mask(0, bytes.Clone(piece))...)
		}
		got = append(got, m.Flush(0)...)
		if want := mask(text, [][]byte{secret}); !bytes.Equal(got, want) {
			t.Fatalf("cut at %d, %d: %q, want %q", c1, c2, got, want)
		}
	})
}
