// Command ticker measures from inside a sandbox how long it was frozen.
// The benchmark uploads it and runs it in a parent it forks: it wakes
// every millisecond and, on SIGTERM, prints the longest gap between two
// wake-ups in microseconds and when that gap began, in Unix nanoseconds.
// It prints "ready" once it ticks.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	last := time.Now()
	var longest time.Duration
	var began time.Time
	fmt.Println("ready")
	for {
		select {
		case <-stop:
			fmt.Printf("%d %d\n", longest.Microseconds(), began.UnixNano())
			return
		case <-tick.C:
			now := time.Now()
			if gap := now.Sub(last); gap > longest {
				longest, began = gap, last
			}
			last = now
		}
	}
}
