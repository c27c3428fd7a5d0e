package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/keylock/keylock/core"
)

// lockJSON is one lock in -json output (show prints one, ls an array).
type lockJSON struct {
	Name           string       `json:"name"`
	Kind           string       `json:"kind"` // mutex, fair, rw, semaphore, or "" when free
	Held           bool         `json:"held"`
	Holders        []holderJSON `json:"holders"`
	Token          uint64       `json:"token"`      // the exclusive hold's fencing token, 0 otherwise
	LastToken      uint64       `json:"last_token"` // the last token handed out for the name
	Waiters        int          `json:"waiters"`    // line + subscribed clients; see core.LockState.Waiters
	WaitingClients int          `json:"waiting_clients"`
	Line           []waiterJSON `json:"line"`                     // the line Redis keeps (mutex, fair, RW, semaphore)
	Permits        int          `json:"permits,omitempty"`        // a semaphore's total, when stored in Redis (absent: unknown)
	PermitsInUse   int          `json:"permits_in_use,omitempty"` // a semaphore's permits held
	WaitingInLine  int          `json:"waiting_in_line"`          // requests in a line Redis keeps
	ServerTime     time.Time    `json:"server_time"`
}

type holderJSON struct {
	Owner    string         `json:"owner"`
	Client   string         `json:"client"` // "orders-api on host-7, pid 4312", else the client id, else ""
	ClientID string         `json:"client_id,omitempty"`
	Identity *core.Identity `json:"identity,omitempty"`
	Mode     string         `json:"mode"`
	Count    int            `json:"count"`
	TTLms    int64          `json:"ttl_ms"` // -1: no expiry
	Token    uint64         `json:"token,omitempty"`
	HeldMs   int64          `json:"held_ms,omitempty"` // estimated from the token; omitted when unknown
}

type waiterJSON struct {
	Owner    string `json:"owner"`
	Client   string `json:"client"`
	ClientID string `json:"client_id,omitempty"`
	Mode     string `json:"mode"`
	TTLms    int64  `json:"ttl_ms"`
	WaitedMs int64  `json:"waited_ms"` // how long it has stood in line, -1 unknown
}

type forceJSON struct {
	Name         string   `json:"name"`
	Freed        bool     `json:"freed"`
	Removed      lockJSON `json:"removed"`
	KeysDeleted  int      `json:"keys_deleted"`
	WokenClients int      `json:"woken_clients"`
	WokenHead    string   `json:"woken_head,omitempty"`
}

func ttlMs(d time.Duration) int64 {
	if d < 0 {
		return -1
	}
	return d.Milliseconds()
}

func toJSON(st *core.LockState) lockJSON {
	j := lockJSON{
		Name: st.Name, Kind: string(st.Kind), Held: st.Held, Token: st.Token, LastToken: st.LastToken,
		Waiters: st.Waiters, WaitingClients: st.WaitingClients, Permits: st.Permits, ServerTime: st.ServerTime,
		PermitsInUse: permitsInUse(st), WaitingInLine: waitingInLine(st),
		Holders: []holderJSON{}, Line: []waiterJSON{},
	}
	for _, h := range st.Holders {
		j.Holders = append(j.Holders, holderJSON{
			Owner: h.Owner, Client: h.Client(), ClientID: h.ClientID, Identity: h.Identity,
			Mode: string(h.Mode), Count: h.Count, TTLms: ttlMs(h.TTL), Token: h.Token,
			HeldMs: h.HeldFor(st.ServerTime).Milliseconds(),
		})
	}
	for _, w := range st.Line {
		wj := waiterJSON{Owner: w.Owner, Client: w.Client(), ClientID: w.ClientID, Mode: string(w.Mode), TTLms: ttlMs(w.TTL), WaitedMs: -1}
		if !w.Since.IsZero() {
			wj.WaitedMs = w.WaitedFor(st.ServerTime).Milliseconds()
		}
		j.Line = append(j.Line, wj)
	}
	return j
}

// printJSON prints v indented (ls, show, force-unlock).
func (a *app) printJSON(v any) int { return a.encode(v, "  ") }

// encode prints v as JSON, on one line when indent is "".
func (a *app) encode(v any, indent string) int {
	enc := json.NewEncoder(a.out)
	enc.SetIndent("", indent)
	if err := enc.Encode(v); err != nil {
		return a.fail(err)
	}
	return exitOK
}

// printable returns s as it is when all of it prints (valid UTF-8, no
// control or other unprintable character), else quoted as a Go string
// ("jobs:\x1b[2J\n"). Lock names, owners and client identities come from
// Redis and may hold any byte: printed raw, an escape sequence would drive
// the terminal and a newline would forge a row of the table.
func printable(s string) string {
	if utf8.ValidString(s) && strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) < 0 {
		return s
	}
	return strconv.Quote(s)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func holderTTL(h core.Holder) string {
	if h.TTL < 0 {
		return "no expiry"
	}
	return since(h.TTL)
}

func heldFor(h core.Holder, now time.Time) string {
	if d := h.HeldFor(now); d > 0 {
		return since(d)
	}
	return "-"
}

// writeState prints one lock for people.
func writeState(w io.Writer, st *core.LockState) {
	kind := string(st.Kind)
	if kind == "" {
		kind = "-"
	}
	fmt.Fprintf(w, "lock     %s\nkind     %s\nheld     %s\n", printable(st.Name), kind, yesNo(st.Held))
	if st.Token != 0 {
		fmt.Fprintf(w, "token    %d\n", st.Token)
	} else if st.LastToken != 0 {
		fmt.Fprintf(w, "token    - (last handed out: %d)\n", st.LastToken)
	}
	if st.Kind == core.KindSemaphore || st.Permits > 0 {
		fmt.Fprintf(w, "permits  %s\n", permitsText(st))
	}
	fmt.Fprintf(w, "waiting  %s\n", waitingText(st))
	if len(st.Holders) > 0 {
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "OWNER\tCLIENT\tMODE\tCOUNT\tTTL\tHELD FOR\tTOKEN")
		for _, h := range st.Holders {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", printable(h.Owner), dash(printable(h.Client())), h.Mode, h.Count,
				holderTTL(h), heldFor(h, st.ServerTime), tokenText(h.Token))
		}
		_ = tw.Flush()
	}
	if len(st.Line) > 0 {
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "#\tWAITER\tCLIENT\tMODE\tWAITED\tKEEPS PLACE FOR")
		for i, l := range st.Line {
			waited := "-"
			if d := l.WaitedFor(st.ServerTime); d > 0 {
				waited = since(d)
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", i+1, printable(l.Owner), dash(printable(l.Client())), l.Mode, waited, since(l.TTL))
		}
		_ = tw.Flush()
		if st.Waiters > len(st.Line) && lined(st) {
			fmt.Fprintf(w, "... and %d more in line\n", st.Waiters-len(st.Line))
		}
	}
}

// lined reports whether every waiter of the lock stands in the line Redis
// keeps (a fair lock's; a contended mutex's, RW lock's or semaphore's).
func lined(st *core.LockState) bool {
	return st.Kind == core.KindFair || len(st.Line) > 0
}

// waitingInLine is the requests waiting in a line Redis keeps.
func waitingInLine(st *core.LockState) int {
	if lined(st) {
		return st.Waiters
	}
	return len(st.Line)
}

// waitingClients is the clients subscribed to the lock's wake-ups beyond
// the line (not counted for a lock whose waiters all stand in line).
func waitingClients(st *core.LockState) int {
	if lined(st) {
		return 0
	}
	return max(st.Waiters-len(st.Line), 0)
}

// permitsInUse is the permits a semaphore's holders hold.
func permitsInUse(st *core.LockState) int {
	n := 0
	for _, h := range st.Holders {
		if h.Mode == core.KindSemaphore {
			n += h.Count
		}
	}
	return n
}

// permitsText says how many of a semaphore's permits are in use, and of
// how many when Redis knows: the total is there only once SetPermits
// stored it; until then it lives in the holders' code (each handle is made
// with its own), and the text says it is unknown here.
func permitsText(st *core.LockState) string {
	if st.Permits > 0 {
		return fmt.Sprintf("%d of %d in use", permitsInUse(st), st.Permits)
	}
	return fmt.Sprintf("%d in use (total unknown: set by the holders' code, not stored in Redis; Semaphore.SetPermits stores it)", permitsInUse(st))
}

// waitingText says who waits, in the units Redis can tell: requests where
// it keeps a line (a mutex's, fair lock's, RW lock's or semaphore's), else the
// clients subscribed to the lock's wake-ups — a client counts once however
// many of its requests wait.
func waitingText(st *core.LockState) string {
	line, clients := waitingInLine(st), waitingClients(st)
	var parts []string
	if line > 0 {
		parts = append(parts, fmt.Sprintf("%d request(s) in line", line))
	}
	switch {
	case st.WaitingClients < 0 && !lined(st):
		parts = append(parts, "clients unknown (the server refused PUBSUB NUMSUB)")
	case clients > 0:
		parts = append(parts, fmt.Sprintf("%d client(s) subscribed to its wake-ups (each may wait with several requests)", clients))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// waitingColumn is waitingText for the ls table: "3 in line", "2 clients",
// "1 in line + 2 clients", "-".
func waitingColumn(st *core.LockState) string {
	line, clients := waitingInLine(st), waitingClients(st)
	var parts []string
	if line > 0 {
		parts = append(parts, fmt.Sprintf("%d in line", line))
	}
	if clients > 0 {
		parts = append(parts, fmt.Sprintf("%d clients", clients))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " + ")
}

func tokenText(t uint64) string {
	if t == 0 {
		return "-"
	}
	return strconv.FormatUint(t, 10)
}

// writeList prints ls for people: one line per lock, its first holder.
func writeList(w io.Writer, states []*core.LockState) {
	if len(states) == 0 {
		fmt.Fprintln(w, "no locks")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tKIND\tHOLDERS\tCLIENT\tTTL\tHELD FOR\tWAITING\tTOKEN")
	for _, st := range states {
		client, ttl, held := "-", "-", "-"
		if len(st.Holders) > 0 {
			h := st.Holders[0]
			client, ttl, held = dash(printable(h.Client())), holderTTL(h), heldFor(h, st.ServerTime)
			if len(st.Holders) > 1 {
				client += fmt.Sprintf(" (+%d)", len(st.Holders)-1)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", printable(st.Name), dash(string(st.Kind)), len(st.Holders),
			client, ttl, held, waitingColumn(st), tokenText(st.Token))
	}
	_ = tw.Flush()
}

// writeForce prints force-unlock's report for people.
func writeForce(w io.Writer, name string, res *core.ForceUnlockResult) {
	st, name := res.Removed, printable(name)
	if !res.Freed {
		fmt.Fprintf(w, "%s was not held: nothing removed\n", name)
	} else {
		fmt.Fprintf(w, "freed %s (%s): removed %d holder(s)\n", name, dash(string(st.Kind)), len(st.Holders))
		for _, h := range st.Holders {
			parts := []string{string(h.Mode), "count " + strconv.Itoa(h.Count), "ttl " + holderTTL(h)}
			if d := heldFor(h, st.ServerTime); d != "-" {
				parts = append(parts, "held for "+d)
			}
			if h.Token != 0 {
				parts = append(parts, "token "+strconv.FormatUint(h.Token, 10))
			}
			fmt.Fprintf(w, "  %s  %s  (%s)\n", printable(h.Owner), dash(printable(h.Client())), strings.Join(parts, ", "))
		}
		fmt.Fprintf(w, "deleted %d key(s); the holders learn of it at their next renewal (lease context cancelled with ErrLockLost)\n", res.KeysDeleted)
	}
	switch {
	case res.WokenHead != "":
		fmt.Fprintf(w, "woke the first waiter in line: %s\n", printable(res.WokenHead))
	case res.WokenClients > 0:
		fmt.Fprintf(w, "woke %d waiting client(s)\n", res.WokenClients)
	default:
		fmt.Fprintln(w, "nobody was waiting")
	}
}
