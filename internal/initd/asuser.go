package initd

import (
	"net/http"

	"github.com/den-dev/den/internal/initd/users"
)

// Acting as a user: every file route is served a second time under
// /v1/as/{user}/, and there den-init does the call with that user's
// permissions, on an OS thread of its own (see users.RunAs), so the
// kernel refuses what the user could not do, and what is made belongs to
// them. A den-init from before answers those routes 404 "no route", never
// doing the call as root.

// handleAs serves h as the user the path names; root is served as
// den-init is.
func (s *Server) handleAs(h handlerFunc) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		acct, err := users.Lookup(s.cfg.EtcDir, r.PathValue("user"))
		if err != nil {
			return err
		}
		if acct.UID == 0 {
			return h(w, r)
		}
		r = r.WithContext(users.WithActing(r.Context(), acct))
		return users.RunAs(acct, func() error { return h(w, r) })
	}
}
