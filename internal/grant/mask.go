package grant

import (
	"bytes"

	"github.com/den-dev/den/internal/guest"
)

// minRedact is the shortest secret value masked in output: shorter ones
// would mask ordinary text and give away little.
const minRedact = 4

// redactions copies the values a run's output is masked for.
func redactions(secrets []guest.Secret) [][]byte {
	var out [][]byte
	for _, sec := range secrets {
		if len(sec.Value) >= minRedact {
			out = append(out, bytes.Clone(sec.Value))
		}
	}
	return out
}

// Masker masks the secret values a run was given in its two output
// streams, also a value a process wrote in pieces: the end of what came so
// far that could begin a value is held back until the next piece, or the
// run's end, shows whether it does. Offsets stay true (a value becomes as
// many '*'), so a stream resumed from what the host has is resumed from
// before the held-back end (Reset). A nil Masker passes output through.
type Masker struct {
	values [][]byte
	carry  [2][]byte // per stream: the held-back end, not yet on the host
}

// NewMasker returns a Masker for the values of secrets, nil when none is
// long enough to mask.
func NewMasker(secrets []guest.Secret) *Masker {
	values := redactions(secrets)
	if len(values) == 0 {
		return nil
	}
	return &Masker{values: values}
}

// Mask returns what of p (the next output of stream i) may go to the
// host, masked.
func (m *Masker) Mask(i int, p []byte) []byte {
	if m == nil {
		return p
	}
	if c := m.carry[i]; len(c) > 0 {
		p, m.carry[i] = append(c, p...), nil
	}
	p = mask(p, m.values)
	if k := m.pending(p); k > 0 {
		m.carry[i] = bytes.Clone(p[len(p)-k:])
		p = p[:len(p)-k]
	}
	return p
}

// pending is the length of the longest end of p that begins a value
// without completing it.
func (m *Masker) pending(p []byte) int {
	best := 0
	for _, v := range m.values {
		from := max(len(p)-(len(v)-1), 0)
		for j := from; j < len(p)-best; j++ {
			k := bytes.IndexByte(p[j:len(p)-best], v[0])
			if k < 0 {
				break
			}
			j += k
			if bytes.HasPrefix(v, p[j:]) {
				best = len(p) - j
				break
			}
		}
	}
	return best
}

// Reset drops what was held back: the stream restarts from before it.
func (m *Masker) Reset() {
	if m != nil {
		m.carry = [2][]byte{}
	}
}

// Flush returns what stream i held back, once its output is complete: a
// beginning of a value that was never finished, passed as it is.
func (m *Masker) Flush(i int) []byte {
	if m == nil {
		return nil
	}
	c := m.carry[i]
	m.carry[i] = nil
	return c
}

// mask replaces every occurrence of a secret value in p with as many '*'
// (the same length, so output offsets stay true), copying p first if it
// holds any.
func mask(p []byte, secrets [][]byte) []byte {
	copied := false
	for _, v := range secrets {
		for i := bytes.Index(p, v); i >= 0; {
			if !copied {
				p, copied = bytes.Clone(p), true
			}
			for j := range v {
				p[i+j] = '*'
			}
			next := bytes.Index(p[i+len(v):], v)
			if next < 0 {
				break
			}
			i += len(v) + next
		}
	}
	return p
}
