package cluster

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/den-dev/den/internal/errdefs"
)

// Cursor is where a follower of the fleet's event stream is: for each
// node, the id (BOOT.SEQ) of the last of that node's events it was sent
// or passed over. It is the id of every event a node of a fleet sends
// (GET /v1/events), so a follower that lost its connection resumes from
// it on any node. Written, its pairs are sorted by node and joined by
// commas: "node-a=3f9a01c2.42,node-b=77aa0011.9". A node it leaves out
// is read from its oldest kept event.
type Cursor map[string]string

// Bounds of a cursor, which comes from outside.
const (
	maxCursorNodes = 256
	maxBootLen     = 32
	maxCursorLen   = maxCursorNodes * (maxNodeName + 1 + maxBootLen + 1 + 20 + 1)
	maxNodeName    = 63
)

// IsCursor reports whether id is written as a cursor (NODE=BOOT.SEQ
// pairs) rather than as one node's event id.
func IsCursor(id string) bool { return strings.Contains(id, "=") }

// ParseCursor reads a cursor as String writes it; anything else is
// errdefs.ErrInvalid, with a hint.
func ParseCursor(s string) (Cursor, error) {
	bad := func(why string) error {
		shown := s
		if len(shown) > 64 {
			shown = shown[:64] + "…"
		}
		return errdefs.WithHint(errdefs.Invalid("event id %q is not one of den's (NODE=BOOT.SEQ,…): %s", shown, why),
			"send back the id of the last event received, as the stream gave it, or none to start from now")
	}
	if len(s) > maxCursorLen {
		return nil, bad("too long")
	}
	c := Cursor{}
	for pair := range strings.SplitSeq(s, ",") {
		node, id, ok := strings.Cut(pair, "=")
		switch {
		case !ok:
			return nil, bad("a pair without =")
		case !ValidName(node):
			return nil, bad("not a node's name before =")
		case !validEventID(id):
			return nil, bad("not BOOT.SEQ after " + node + "=")
		case c[node] != "":
			return nil, bad("node " + node + " twice")
		case len(c) == maxCursorNodes:
			return nil, bad("more than " + strconv.Itoa(maxCursorNodes) + " nodes")
		}
		c[node] = id
	}
	return c, nil
}

// String writes c: its pairs sorted by node, joined by commas.
func (c Cursor) String() string {
	var b strings.Builder
	for i, node := range slices.Sorted(maps.Keys(c)) {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(node)
		b.WriteByte('=')
		b.WriteString(c[node])
	}
	return b.String()
}

// validEventID reports whether id is one node's event id, BOOT.SEQ: BOOT
// letters and digits, SEQ a decimal number.
func validEventID(id string) bool {
	boot, seq, ok := strings.Cut(id, ".")
	if !ok || boot == "" || len(boot) > maxBootLen || seq == "" || len(seq) > 20 {
		return false
	}
	for _, r := range boot {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	for _, r := range seq {
		if r < '0' || r > '9' {
			return false
		}
	}
	_, err := strconv.ParseUint(seq, 10, 64)
	return err == nil
}

// ValidName reports whether name may name a node: it shows in logs,
// URLs, `den node` commands and event cursors.
func ValidName(name string) bool {
	if name == "" || len(name) > maxNodeName {
		return false
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}
