package dashboard

import (
	"fmt"
	"net/http"
	"time"
)

// Option configures a Handler (see New).
type Option func(*config)

// config is what the options set; defaults live in defaults.
type config struct {
	forceUnlock bool                     // WithForceUnlock was given
	authorize   func(*http.Request) bool // its authorization check
	longHold    time.Duration
	refresh     time.Duration
	pageSize    int
	timeout     time.Duration
	title       string
}

func defaults() config {
	return config{refresh: 500 * time.Millisecond, pageSize: 100, timeout: 5 * time.Second, title: "keylock"}
}

// WithForceUnlock turns on force-unlock: the lock page gets a button that
// frees the lock (core.Client.ForceUnlock) and the handler accepts
// POST api/force-unlock. authorize is asked on every force-unlock request,
// and on every page load to decide whether to show the button; it must
// check the user with the mounting service's own authentication (a
// session, a role), since the dashboard has none. The request it gets has
// already passed the cross-site checks (see the package doc); a check of
// the client's address alone is not enough (DNS rebinding, see there).
// Default: off — the dashboard is read-only. authorize must not be nil.
func WithForceUnlock(authorize func(*http.Request) bool) Option {
	return func(c *config) { c.forceUnlock, c.authorize = true, authorize }
}

// WithLongHold highlights holds that have been held longer than d (their
// age is read from the hold's fencing token; Redis keeps no token per
// semaphore holder, so permits are never highlighted). Default: 0, no
// highlighting.
func WithLongHold(d time.Duration) Option { return func(c *config) { c.longHold = d } }

// WithRefresh sets how often an open page asks for fresh state (each
// refresh of the lock list scans the keyspace with SCAN; a hidden browser
// tab does not refresh). Default: 500ms.
func WithRefresh(d time.Duration) Option { return func(c *config) { c.refresh = d } }

// WithPageSize sets how many locks one page of the list shows (the page
// also offers 50, 100, 500). Default: 100.
func WithPageSize(n int) Option { return func(c *config) { c.pageSize = n } }

// WithTimeout bounds the Redis calls of one request. Default: 5s.
func WithTimeout(d time.Duration) Option { return func(c *config) { c.timeout = d } }

// WithTitle sets the name shown in the page header and the browser tab,
// e.g. "orders-api locks". Default: "keylock".
func WithTitle(s string) Option { return func(c *config) { c.title = s } }

func (c *config) validate() error {
	switch {
	case c.forceUnlock && c.authorize == nil:
		return fmt.Errorf("dashboard: WithForceUnlock needs an authorization check, got nil")
	case c.longHold < 0:
		return fmt.Errorf("dashboard: WithLongHold(%s): negative", c.longHold)
	case c.refresh < 50*time.Millisecond:
		return fmt.Errorf("dashboard: WithRefresh(%s): below 50ms", c.refresh)
	case c.pageSize < 1 || c.pageSize > maxPageSize:
		return fmt.Errorf("dashboard: WithPageSize(%d): want 1..%d", c.pageSize, maxPageSize)
	case c.timeout <= 0:
		return fmt.Errorf("dashboard: WithTimeout(%s): not positive", c.timeout)
	}
	return nil
}
