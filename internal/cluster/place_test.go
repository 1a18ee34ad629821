package cluster

import (
	"errors"
	"testing"
	"time"

	"github.com/den-dev/den/internal/errdefs"
)

func TestPlace(t *testing.T) {
	now := time.Now()
	gib := int64(1 << 30)
	node := func(name string, offered, committed int64, mods ...func(*Node)) Node {
		n := Node{Name: name, State: StateActive, LeaseExpires: now.Add(time.Minute),
			Info: Info{MemoryBytes: offered * gib, CommittedMemoryBytes: committed * gib, RunscVersion: "r1", CPUFeatures: []string{"avx"}}}
		for _, m := range mods {
			m(&n)
		}
		return n
	}
	draining := func(n *Node) { n.State = StateDraining }
	expired := func(n *Node) { n.LeaseExpires = now.Add(-time.Second) }
	otherEngine := func(n *Node) { n.Info.RunscVersion = "r2" }
	like := &Info{RunscVersion: "r1", CPUFeatures: []string{"avx"}}

	for _, tc := range []struct {
		name  string
		nodes []Node
		want  Want
		place string
		err   error
	}{
		{"least committed share", []Node{node("a", 8, 4), node("b", 8, 3), node("c", 8, 2)}, Want{Portable: true, MemoryBytes: gib}, "c", nil},
		{"this node on a tie", []Node{node("a", 8, 2), node("b", 8, 2)}, Want{Portable: true}, "a", nil},
		{"not portable: this node alone", []Node{node("a", 8, 6), node("b", 8, 0)}, Want{MemoryBytes: gib}, "a", nil},
		{"not portable: home, even full", []Node{node("a", 8, 0), node("b", 2, 2)}, Want{Home: "b", MemoryBytes: gib}, "b", nil},
		{"home preferred while it has room", []Node{node("a", 8, 0), node("b", 8, 6)}, Want{Portable: true, Home: "b", MemoryBytes: gib}, "b", nil},
		{"home full: elsewhere", []Node{node("a", 8, 7), node("b", 8, 7), node("c", 8, 5)}, Want{Portable: true, Home: "b", MemoryBytes: 2 * gib}, "c", nil},
		{"home draining: elsewhere", []Node{node("a", 8, 4), node("b", 8, 0, draining)}, Want{Portable: true, Home: "b"}, "a", nil},
		{"no room anywhere: least committed", []Node{node("a", 4, 4), node("b", 4, 3)}, Want{Portable: true, MemoryBytes: 2 * gib}, "b", nil},
		{"room beats share", []Node{node("a", 2, 0), node("b", 64, 40)}, Want{Portable: true, MemoryBytes: 4 * gib}, "b", nil},
		{"elsewhere rules out this node", []Node{node("a", 8, 0), node("b", 8, 4)}, Want{Portable: true, Elsewhere: true}, "b", nil},
		{"expired and draining are skipped", []Node{node("a", 8, 8, draining), node("b", 8, 0, expired), node("c", 8, 7)}, Want{Portable: true}, "c", nil},
		{"same engine only", []Node{node("a", 8, 6), node("b", 8, 0, otherEngine)}, Want{Portable: true, Elsewhere: false, Like: like}, "a", nil},
		{"same engine, none elsewhere", []Node{node("a", 8, 6), node("b", 8, 0, otherEngine)}, Want{Portable: true, Elsewhere: true, Like: like}, "", errdefs.ErrUnavailable},
		{"not portable, home draining", []Node{node("a", 8, 0, draining)}, Want{}, "", errdefs.ErrUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := place(tc.nodes, "a", tc.want, now)
			if got != tc.place || !errors.Is(err, tc.err) || (tc.err == nil && err != nil) {
				t.Errorf("place = %q, %v; want %q, %v", got, err, tc.place, tc.err)
			}
		})
	}
}
