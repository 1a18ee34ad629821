package sandbox

import "time"

// Lifecycle verbs, as VerbObserver is told them.
const (
	VerbCreate     = "create"
	VerbExec       = "exec"      // starting a command, until it runs
	VerbPause      = "pause"     // on request or by the idle policy
	VerbResume     = "resume"    // the resume verb, from RAM or from disk
	VerbHibernate  = "hibernate" // on request or by the idle policy
	VerbWake       = "wake"      // a sleeping sandbox brought back because something used it
	VerbCheckpoint = "checkpoint"
	VerbRestore    = "restore"
	VerbFork       = "fork"
)

// Verbs lists the verbs a VerbObserver hears of.
var Verbs = []string{VerbCreate, VerbExec, VerbPause, VerbResume, VerbHibernate, VerbWake, VerbCheckpoint, VerbRestore, VerbFork}

// VerbObserver hears how long each lifecycle verb took and how it ended
// (err nil: it succeeded). It is called on the verb's goroutine, once the
// verb is over: it must be quick.
type VerbObserver interface {
	ObserveVerb(verb string, took time.Duration, err error)
}

// observe tells the observer of a verb that started at start; use it as
// `defer s.observe(VerbX, time.Now(), &err)` with a named error result.
func (s *Service) observe(verb string, start time.Time, errp *error) {
	if s.cfg.Observer == nil {
		return
	}
	s.cfg.Observer.ObserveVerb(verb, time.Since(start), *errp)
}
