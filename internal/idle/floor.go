package idle

import (
	"context"
	"time"
)

// A sandbox's own policy may not set a duration shorter than the daemon's
// floor (dend --min-ttl), so that a slip cannot destroy work at once. A
// door whose protocol asks for lifetimes on purpose (E2B's timeouts:
// setTimeout(5000) means five seconds) carries a floor of its own, which
// its admin chose, on the request's context.

type floorKey struct{}

// WithFloor returns ctx carrying floor, the shortest duration a policy
// set under ctx may hold instead of the daemon's.
func WithFloor(ctx context.Context, floor time.Duration) context.Context {
	return context.WithValue(ctx, floorKey{}, floor)
}

// Floor is the floor ctx carries (WithFloor), else def.
func Floor(ctx context.Context, def time.Duration) time.Duration {
	if f, ok := ctx.Value(floorKey{}).(time.Duration); ok {
		return f
	}
	return def
}
