// Package idle holds what dend decides about a sandbox while nobody is
// calling it: the idle policy (Policy: pause, hibernate, destroy at the
// end of a TTL of running time, and checkpoint retention) and its rules
// (NextDue, Usage), the activity that postpones it (Activity: when each
// sandbox was last used, and the open requests holding it in use),
// whether den-init must check its limits while the host watches them
// (LimitChecks), and which running sandboxes the host watches
// (LimitWatches).
//
// It never imports internal/sandbox and changes no sandbox: it knows
// sandboxes by id and reads only what the core hands it (a Phase, times,
// the host's usage). Pausing, hibernating and destroying, and removing
// checkpoints, are the core's verbs; the core asks this package when.
package idle
