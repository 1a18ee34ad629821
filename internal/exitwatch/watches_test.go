package exitwatch

import (
	"context"
	"testing"
)

// A new watch of an instance ends the earlier one; forgetting an ended
// watch leaves the newer in place; End ends the current watch once, and
// an instance never watched is no error.
func TestWatches(t *testing.T) {
	var v Watches
	ctx1, cancel1 := context.WithCancel(context.Background())
	forget1 := v.Add("inst", cancel1)
	ctx2, cancel2 := context.WithCancel(context.Background())
	forget2 := v.Add("inst", cancel2)
	if ctx1.Err() == nil {
		t.Fatal("a second watch of the instance left the first running")
	}
	forget1()
	if ctx2.Err() != nil {
		t.Fatal("forgetting the first watch ended the second")
	}
	v.End("inst")
	if ctx2.Err() == nil {
		t.Fatal("End left the watch running")
	}
	forget2()
	v.End("inst")
	v.End("never watched")

	ctx3, cancel3 := context.WithCancel(context.Background())
	forget3 := v.Add("other", cancel3)
	forget3()
	v.End("other")
	if ctx3.Err() != nil {
		t.Fatal("End ended a watch that was forgotten")
	}
	cancel3()
}
