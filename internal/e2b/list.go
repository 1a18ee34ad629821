package e2b

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

// Listing: den lists what the caller may see (an owner token, its own
// sandboxes), and the filters, order and pages of E2B's list apply to it
// here.

// Page sizes of GET /v2/sandboxes.
const (
	defaultPage = 100
	maxPage     = 100
)

// headerNextToken carries the token of the next page, sent only when
// there is one.
const headerNextToken = "X-Next-Token"

// listQuery is what GET /v2/sandboxes asks for.
type listQuery struct {
	states       []string // running, paused; empty for both
	metadata     url.Values
	template     string
	startedAfter time.Time
	asc          bool
	limit        int
	after        *cursor // the last sandbox of the page before
}

// cursor is a position in the order of startedAt, then id.
type cursor struct {
	at time.Time
	id string
}

func (d *Door) list(w http.ResponseWriter, r *http.Request, c *client.Client, token string) error {
	q, err := parseList(r.URL.Query(), nil)
	if err != nil {
		return err
	}
	return d.answerList(w, r, c, q)
}

// listV1 is the old list: running sandboxes unless told otherwise.
func (d *Door) listV1(w http.ResponseWriter, r *http.Request, c *client.Client, token string) error {
	q, err := parseList(r.URL.Query(), []string{stateRunning})
	if err != nil {
		return err
	}
	return d.answerList(w, r, c, q)
}

func (d *Door) answerList(w http.ResponseWriter, r *http.Request, c *client.Client, q listQuery) error {
	sbs, err := c.ListSandboxes(r.Context())
	if err != nil {
		return err
	}
	page, next := q.apply(sbs)
	now := time.Now()
	out := make([]detailJSON, 0, len(page))
	for i := range page {
		out = append(out, detail(&page[i], now))
	}
	if next != nil {
		w.Header().Set(headerNextToken, next.token())
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func parseList(v url.Values, defaultStates []string) (listQuery, error) {
	q := listQuery{states: defaultStates}
	if states := splitAll(v["state"]); len(states) > 0 {
		for _, s := range states {
			if s != stateRunning && s != statePaused {
				return q, invalid("invalid state %q: use running or paused", s)
			}
		}
		q.states = states
	}
	if m := v.Get("metadata"); m != "" {
		// The SDK escapes each key and value, then builds a query string
		// of them, which travels escaped once more.
		pairs, err := url.ParseQuery(m)
		if err != nil {
			return q, invalid("invalid metadata %q: give key=value pairs joined by &", m)
		}
		q.metadata = url.Values{}
		for k, vs := range pairs {
			key, err1 := url.QueryUnescape(k)
			if err1 != nil {
				return q, invalid("invalid metadata key %q", k)
			}
			for _, val := range vs {
				val, err2 := url.QueryUnescape(val)
				if err2 != nil {
					return q, invalid("invalid metadata value %q", val)
				}
				q.metadata.Add(key, val)
			}
		}
	}
	q.template = v.Get("template")
	if s := v.Get("startedAfter"); s != "" {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return q, invalid("invalid startedAfter %q: give an RFC 3339 time", s)
		}
		q.startedAfter = t
	}
	switch o := v.Get("order"); o {
	case "", "desc":
	case "asc":
		q.asc = true
	default:
		return q, invalid("invalid order %q: use asc or desc", o)
	}
	var err error
	q.limit, q.after, err = parsePage(v)
	return q, err
}

// parsePage reads the size of a page and where it starts, as the SDK's
// paginators send them: limit and nextToken.
func parsePage(v url.Values) (limit int, after *cursor, err error) {
	limit = defaultPage
	if s := v.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxPage {
			return 0, nil, invalid("invalid limit %q: give a number from 1 to %d", s, maxPage)
		}
		limit = n
	}
	if s := v.Get("nextToken"); s != "" {
		cur, ok := parseCursor(s)
		if !ok {
			return 0, nil, invalid("invalid nextToken %q: pass on the X-Next-Token of the page before", s)
		}
		after = &cur
	}
	return limit, after, nil
}

// splitAll splits comma-separated values, as the SDK sends arrays.
func splitAll(vs []string) []string {
	var out []string
	for _, v := range vs {
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}

// apply filters, orders and pages sbs; next is where the next page
// starts, nil when this is the last.
func (q listQuery) apply(sbs []api.Sandbox) (page []api.Sandbox, next *cursor) {
	var kept []api.Sandbox
	for _, sb := range sbs {
		if q.matches(&sb) {
			kept = append(kept, sb)
		}
	}
	return pageOf(kept, cursorOf, q.asc, q.after, q.limit)
}

// pageOf orders items by their cursors (newest first unless asc) and
// returns the limit of them after the cursor after; next is where the
// next page starts, nil when this is the last.
func pageOf[T any](items []T, at func(*T) cursor, asc bool, after *cursor, limit int) (page []T, next *cursor) {
	slices.SortFunc(items, func(a, b T) int {
		c := at(&a).compare(at(&b))
		if !asc {
			c = -c
		}
		return c
	})
	start := 0
	if after != nil {
		start = len(items)
		for i := range items {
			c := at(&items[i]).compare(*after)
			if asc && c > 0 || !asc && c < 0 {
				start = i
				break
			}
		}
	}
	items = items[start:]
	if len(items) > limit {
		last := at(&items[limit-1])
		return items[:limit], &last
	}
	return items, nil
}

func (q listQuery) matches(sb *api.Sandbox) bool {
	if sb.State == api.StateDestroyed {
		return false
	}
	if len(q.states) > 0 && !slices.Contains(q.states, stateOf(sb)) {
		return false
	}
	if q.template != "" && q.template != templateOf(sb.Image) && q.template != sb.Image {
		return false
	}
	if !q.startedAfter.IsZero() && sb.CreatedAt.Before(q.startedAfter) {
		return false
	}
	for k, vs := range q.metadata {
		for _, v := range vs {
			if got, ok := sb.Labels[k]; !ok || got != v {
				return false
			}
		}
	}
	return true
}

func cursorOf(sb *api.Sandbox) cursor { return cursor{at: sb.CreatedAt, id: sb.ID} }

func (c cursor) compare(o cursor) int {
	if d := c.at.Compare(o.at); d != 0 {
		return d
	}
	return strings.Compare(c.id, o.id)
}

// token is the cursor as X-Next-Token carries it.
func (c cursor) token() string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(c.at.UnixNano(), 10) + "." + c.id))
}

func parseCursor(s string) (cursor, bool) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return cursor{}, false
	}
	ns, id, ok := strings.Cut(string(b), ".")
	n, err := strconv.ParseInt(ns, 10, 64)
	if !ok || err != nil || id == "" {
		return cursor{}, false
	}
	return cursor{at: time.Unix(0, n), id: id}, true
}
