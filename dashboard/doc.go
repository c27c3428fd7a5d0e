// Package dashboard is a web view of keylock's locks that you mount in
// your own service, as asynqmon is mounted for asynq queues: every lock
// with its kind, holders (the service, host and pid of their process when
// their Client was made with core.WithIdentity), how long each has been
// held, TTL, fencing token, waiters and semaphore permits; a filter by
// glob; a page per lock; live updates without reloading. The keylock CLI
// serves the same handler on its own: keylock -redis ADDR ui.
//
//	locks := core.New(rdb)
//	h, err := dashboard.New(locks, dashboard.WithLongHold(30*time.Second))
//	if err != nil { ... }
//	mux.Handle("/locks/", http.StripPrefix("/locks", h))
//
// Every path the handler serves is relative to where it is mounted:
//
//	GET  /                      the list of locks (?glob=orders:*&offset=&limit=)
//	GET  /lock?name=NAME        one lock: holders, waiters in line, force unlock
//	GET  /api/locks             the list's JSON: one page of the locks matching glob
//	GET  /api/lock?name=NAME    one lock's JSON
//	GET  /api/deadlocks         cycles of owners waiting for each other (?glob=)
//	POST /api/force-unlock      {"name": NAME} — only with WithForceUnlock
//	GET  /assets/…              the pages' script and style sheet (embedded)
//
// The pages poll the JSON API (every 500ms by default, WithRefresh; not
// while the browser tab is hidden). Listing finds names with core.Client.
// List (SCAN, on a Redis Cluster on every master) and inspects only the
// page shown (core.Client.InspectNames, pipelined), so a page stays fast
// with many thousands of locks; every fifth refresh also looks for
// deadlocks (core.Client.Deadlocks: the same SCAN, and the state of the
// locks that have waiters). Everything the pages load comes from the
// handler: they work offline. A lock name that is not valid UTF-8 reaches
// the page with U+FFFD in place of its invalid bytes (JSON strings hold
// UTF-8 only): the page lists it, but cannot show or free it by that name.
//
// # Read-only unless you say otherwise
//
// By default nothing the dashboard does writes to Redis. WithForceUnlock
// adds a button on the lock page that calls core.Client.ForceUnlock; it
// takes an authorization check of your own (the dashboard has no users).
// A force-unlock request must be a POST with Content-Type
// application/json and the X-Keylock-Dashboard header the page's script
// sets; cross-origin requests (Sec-Fetch-Site, Origin, as
// net/http.CrossOriginProtection checks them) are refused before your check
// is asked. A page of another site cannot send that header without a CORS
// preflight, which the handler never grants. Pages are served with a
// Content-Security-Policy that allows only the handler's own script and
// forbids framing.
//
// Mount the dashboard behind your service's authentication: even read-only,
// it shows lock names and the hosts and pids of their holders. An
// authorization check that looks only at where a request comes from (a
// loopback or internal client address) is not enough: a web page whose own
// name its author points at your address (DNS rebinding) is same-origin
// with the dashboard and passes every check above. Also check the
// request's Host against the names you serve the dashboard under, as
// keylock ui does (421 for any other).
//
// # Long holds
//
// WithLongHold(d) highlights holds older than d. A hold's age is read from
// its fencing token (the server's clock when the lock was taken), so it is
// known for mutexes, fair locks and RW holders. A semaphore's lease has a
// token too, but Redis does not keep which holder got which, so a permit's
// age is not shown.
package dashboard
