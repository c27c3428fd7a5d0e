package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"mime"
	"net/http"
	"strconv"
	"time"

	"github.com/keylock/keylock/core"
)

// maxPageSize bounds one page of the list (each listed lock is inspected).
const maxPageSize = 1000

// requestHeader must be on every force-unlock request. A page of another
// site cannot send a custom header to this origin without a CORS preflight,
// which the dashboard never answers: with the Origin and Sec-Fetch-Site
// checks, this keeps cross-site requests out.
const requestHeader = "X-Keylock-Dashboard"

// listJSON is GET api/locks: one page of the locks matching a glob.
type listJSON struct {
	Glob       string     `json:"glob"`
	Total      int        `json:"total"` // locks matching the glob
	Offset     int        `json:"offset"`
	Limit      int        `json:"limit"`
	Locks      []lockJSON `json:"locks"`
	ServerTime time.Time  `json:"server_time"`
	ElapsedMs  float64    `json:"elapsed_ms"` // time spent in Redis for this page
}

// lockJSON is one lock; tokens are strings (JavaScript numbers are exact
// only up to 2^53).
type lockJSON struct {
	Name           string       `json:"name"`
	Kind           string       `json:"kind"` // mutex, fair, rw, semaphore, "" when free
	Held           bool         `json:"held"`
	Holders        []holderJSON `json:"holders"`
	Token          string       `json:"token,omitempty"`
	LastToken      string       `json:"last_token,omitempty"`
	Waiters        int          `json:"waiters"`
	WaitingClients int          `json:"waiting_clients"` // -1: not counted
	Line           []waiterJSON `json:"line"`
	InUse          int          `json:"in_use,omitempty"`  // semaphore: permits held
	Permits        int          `json:"permits,omitempty"` // semaphore: stored permit count, 0 unknown
	HeldMs         int64        `json:"held_ms"`           // the oldest hold's age, -1 unknown
	Long           bool         `json:"long"`              // a hold is older than the long-hold threshold
}

type holderJSON struct {
	Owner    string `json:"owner"`
	Client   string `json:"client"` // "orders-api on host-7, pid 4312", else the client id
	ClientID string `json:"client_id,omitempty"`
	Service  string `json:"service,omitempty"`
	Host     string `json:"host,omitempty"`
	PID      int    `json:"pid,omitempty"`
	Mode     string `json:"mode"`
	Count    int    `json:"count"`
	TTLms    int64  `json:"ttl_ms"` // -1: no expiry
	Token    string `json:"token,omitempty"`
	HeldMs   int64  `json:"held_ms"` // -1: unknown
	Long     bool   `json:"long"`
}

type waiterJSON struct {
	Owner    string `json:"owner"`
	Client   string `json:"client"`
	Mode     string `json:"mode"`
	TTLms    int64  `json:"ttl_ms"`    // how long it keeps its place unrenewed
	WaitedMs int64  `json:"waited_ms"` // how long it has stood in line, -1 unknown
}

// forceJSON is POST api/force-unlock's reply.
type forceJSON struct {
	Name         string   `json:"name"`
	Freed        bool     `json:"freed"`
	Removed      lockJSON `json:"removed"`
	WokenClients int      `json:"woken_clients"`
	WokenHead    string   `json:"woken_head,omitempty"`
}

// deadlocksJSON is GET api/deadlocks: the cycles of owners waiting for
// each other's locks among the locks matching a glob (core.Deadlocks).
type deadlocksJSON struct {
	Glob      string          `json:"glob"`
	Deadlocks []core.Deadlock `json:"deadlocks"`
}

type errorJSON struct {
	Error string `json:"error"`
}

func (h *Handler) listLocks(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	glob := q.Get("glob")
	if glob == "" {
		glob = "*"
	}
	offset, err1 := intParam(q.Get("offset"), 0)
	limit, err2 := intParam(q.Get("limit"), h.cfg.pageSize)
	if err := errors.Join(err1, err2); err != nil || offset < 0 || limit < 1 || limit > maxPageSize {
		writeError(w, http.StatusBadRequest, "offset must be >= 0 and limit 1.."+strconv.Itoa(maxPageSize))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.timeout)
	defer cancel()
	start := time.Now()
	names, err := h.locks.List(ctx, glob)
	if err != nil {
		writeCoreError(w, err)
		return
	}
	from := min(offset, len(names))
	page := names[from : from+min(limit, len(names)-from)]
	states, err := h.locks.InspectNames(ctx, page)
	if err != nil {
		writeCoreError(w, err)
		return
	}
	out := listJSON{Glob: glob, Total: len(names), Offset: offset, Limit: limit, Locks: make([]lockJSON, 0, len(states)), ServerTime: time.Now()}
	for _, st := range states {
		out.Locks = append(out.Locks, h.lockJSON(st))
		out.ServerTime = st.ServerTime
	}
	out.ElapsedMs = float64(time.Since(start).Microseconds()) / 1000
	writeJSON(w, http.StatusOK, out)
}

// listDeadlocks inspects every lock matching the glob that has waiters
// (not one page), so the page asks for it less often than for the list.
func (h *Handler) listDeadlocks(w http.ResponseWriter, r *http.Request) {
	glob := r.URL.Query().Get("glob")
	if glob == "" {
		glob = "*"
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.timeout)
	defer cancel()
	found, err := h.locks.Deadlocks(ctx, glob)
	if err != nil {
		writeCoreError(w, err)
		return
	}
	if found == nil {
		found = []core.Deadlock{}
	}
	out := deadlocksJSON{Glob: glob, Deadlocks: found}
	writeJSON(w, http.StatusOK, out)
}

func (h *Handler) showLock(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.timeout)
	defer cancel()
	st, err := h.locks.Inspect(ctx, r.URL.Query().Get("name"))
	if err != nil {
		writeCoreError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, h.lockJSON(st))
}

// forceUnlock is POST api/force-unlock {"name": "..."}: off (404) unless
// WithForceUnlock; cross-site requests and requests without the page's
// header are refused (403) before the authorization check is asked.
func (h *Handler) forceUnlock(w http.ResponseWriter, r *http.Request) {
	if !h.cfg.forceUnlock {
		http.NotFound(w, r)
		return
	}
	if err := h.csrf.Check(r); err != nil {
		writeError(w, http.StatusForbidden, "cross-origin request refused")
		return
	}
	if r.Header.Get(requestHeader) != "1" {
		writeError(w, http.StatusForbidden, "missing "+requestHeader+" header")
		return
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		writeError(w, http.StatusUnsupportedMediaType, "want Content-Type application/json")
		return
	}
	if !h.cfg.authorize(r) {
		writeError(w, http.StatusForbidden, "not authorized to force-unlock")
		return
	}
	var body struct {
		Name string `json:"name"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10)).Decode(&body); err != nil {
		writeError(w, http.StatusBadRequest, "bad JSON body: "+err.Error())
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.timeout)
	defer cancel()
	res, err := h.locks.ForceUnlock(ctx, body.Name)
	if err != nil {
		writeCoreError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, forceJSON{
		Name: body.Name, Freed: res.Freed, Removed: h.lockJSON(res.Removed),
		WokenClients: res.WokenClients, WokenHead: res.WokenHead,
	})
}

func (h *Handler) lockJSON(st *core.LockState) lockJSON {
	j := lockJSON{
		Name: st.Name, Kind: string(st.Kind), Held: st.Held, Token: token(st.Token), LastToken: token(st.LastToken),
		Waiters: st.Waiters, WaitingClients: st.WaitingClients, Permits: st.Permits,
		Holders: make([]holderJSON, 0, len(st.Holders)), Line: make([]waiterJSON, 0, len(st.Line)), HeldMs: -1,
	}
	for _, hd := range st.Holders {
		hj := holderJSON{
			Owner: hd.Owner, Client: hd.Client(), ClientID: hd.ClientID, Mode: string(hd.Mode),
			Count: hd.Count, TTLms: durMs(hd.TTL), Token: token(hd.Token), HeldMs: -1,
		}
		if id := hd.Identity; id != nil {
			hj.Service, hj.Host, hj.PID = id.Service, id.Host, id.PID
		}
		if d := hd.HeldFor(st.ServerTime); d > 0 {
			hj.HeldMs = d.Milliseconds()
			hj.Long = h.cfg.longHold > 0 && d > h.cfg.longHold
		}
		j.HeldMs = max(j.HeldMs, hj.HeldMs)
		j.Long = j.Long || hj.Long
		if st.Kind == core.KindSemaphore {
			j.InUse += hd.Count
		}
		j.Holders = append(j.Holders, hj)
	}
	for _, wt := range st.Line {
		wj := waiterJSON{Owner: wt.Owner, Client: wt.Client(), Mode: string(wt.Mode), TTLms: durMs(wt.TTL), WaitedMs: -1}
		if !wt.Since.IsZero() {
			wj.WaitedMs = wt.WaitedFor(st.ServerTime).Milliseconds()
		}
		j.Line = append(j.Line, wj)
	}
	return j
}

func token(t uint64) string {
	if t == 0 {
		return ""
	}
	return strconv.FormatUint(t, 10)
}

func durMs(d time.Duration) int64 {
	if d < 0 {
		return -1
	}
	return d.Milliseconds()
}

func intParam(s string, def int) (int, error) {
	if s == "" {
		return def, nil
	}
	return strconv.Atoi(s)
}

func writeCoreError(w http.ResponseWriter, err error) {
	status := http.StatusBadGateway // a bad reply
	switch {
	case errors.Is(err, core.ErrInvalidName):
		status = http.StatusBadRequest
	case errors.Is(err, core.ErrUnavailable), errors.Is(err, core.ErrClosed):
		status = http.StatusServiceUnavailable
	case errors.Is(err, context.DeadlineExceeded):
		status = http.StatusGatewayTimeout
	}
	writeError(w, status, err.Error())
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, errorJSON{Error: msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
