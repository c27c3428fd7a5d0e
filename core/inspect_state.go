package core

import (
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/keylock/keylock/core/internal/reply"
)

// decodeSnapshot reads lib_inspect.lua's reply (reply.ParseSnapshot) as the
// LockState of name.
func decodeSnapshot(name string, v any) (*LockState, error) {
	s, err := reply.ParseSnapshot(v)
	if err != nil {
		return nil, err
	}
	return snapshotState(name, s), nil
}

// waiterKind is the kind of lock a waiter waits for, from its standing
// attempt: a Mutex's waiter marks it 'm' (lib_queue.lua), a semaphore's
// 's<n>' (lib_sem.lua), an RW lock's 'w' or 'r' (lib_rw.lua).
func waiterKind(st reply.Standing) Kind {
	switch {
	case st.Kind == "m":
		return KindMutex
	case st.Kind == "w":
		return KindWrite
	case st.Kind == "r":
		return KindRead
	case strings.HasPrefix(st.Kind, "s"):
		return KindSemaphore
	}
	return KindFair
}

// lineKind is the kind of a lock whose line is not empty: a contended
// Mutex, a FairMutex and a Semaphore keep the same line; it is the kind
// every waiter shown waits as, a FairMutex when they differ.
func lineKind(s reply.Snapshot) Kind {
	if len(s.Queue) == 0 {
		return KindFair
	}
	kind := lockKind(waiterKind(s.Standing[s.Queue[0]]))
	for _, m := range s.Queue[1:] {
		if lockKind(waiterKind(s.Standing[m])) != kind {
			return KindFair
		}
	}
	return kind
}

// lockKind is the kind of lock a waiter of mode waits for.
func lockKind(mode Kind) Kind {
	if mode == KindRead || mode == KindWrite {
		return KindRW
	}
	return mode
}

// snapshotState turns a snapshot into a LockState (WaitingClients and the
// identities are filled in later).
func snapshotState(name string, s reply.Snapshot) *LockState {
	now := time.UnixMilli(s.Now)
	st := &LockState{Name: name, LastToken: s.Fence, Permits: int(s.Size), ServerTime: now, WaitingClients: -1}
	_, exclusive := s.Hash[":token"]
	switch {
	case len(s.Expiry) > 0 || s.Size > 0 || (len(s.Hash) > 0 && !exclusive):
		st.Kind = KindSemaphore
	case len(s.Readers) > 0 || len(s.RCount) > 0 || len(s.Intents) > 0:
		st.Kind = KindRW
	case s.QueueLen > 0 || len(s.Deadlines) > 0:
		st.Kind = lineKind(s)
	case exclusive:
		st.Kind = KindMutex
	}
	ttl := time.Duration(-1)
	if s.PTTL >= 0 {
		ttl = msDur(s.PTTL)
	}
	if st.Kind == KindSemaphore {
		for _, e := range s.Expiry {
			if e.Score <= s.Now {
				continue // its lease ran out: pruned at the next acquisition
			}
			n, _ := strconv.Atoi(s.Hash[e.Member])
			if n == 0 {
				continue
			}
			owner := e.Member // the holder id, where no owner id is kept (lib_sem.lua)
			if o, ok := s.Hash[":"+e.Member]; ok {
				owner = o
			}
			st.Holders = append(st.Holders, Holder{Owner: owner, Mode: KindSemaphore, Count: n, TTL: msDur(e.Score - s.Now)})
		}
	} else if exclusive {
		st.Token = reply.Token(s.Hash[":token"])
		mode := st.Kind
		if mode == KindRW {
			mode = KindWrite
		}
		for owner, n := range s.Hash {
			if strings.HasPrefix(owner, ":") {
				continue // the hold's bookkeeping (':token', ':wd', ':fx'): owner ids never start with ':'
			}
			cnt, _ := strconv.Atoi(n)
			st.Holders = append(st.Holders, Holder{Owner: owner, Mode: mode, Count: cnt, TTL: ttl, Token: st.Token, Since: tokenTime(st.Token, now)})
		}
	}
	for _, r := range s.Readers {
		if r.Score <= s.Now {
			continue // expired reader, pruned at the next acquisition
		}
		cnt, _ := strconv.Atoi(s.RCount[r.Member])
		tok := reply.Token(s.RCount[":"+r.Member])
		st.Holders = append(st.Holders, Holder{Owner: r.Member, Mode: KindRead, Count: cnt, TTL: msDur(r.Score - s.Now), Token: tok, Since: tokenTime(tok, now)})
	}
	sort.SliceStable(st.Holders, func(i, j int) bool {
		a, b := st.Holders[i], st.Holders[j]
		if !a.Since.Equal(b.Since) {
			return !a.Since.IsZero() && (b.Since.IsZero() || a.Since.Before(b.Since))
		}
		return a.Owner < b.Owner
	})
	st.Held = len(st.Holders) > 0
	for _, m := range s.Queue {
		standing := s.Standing[m]
		w := Waiter{Owner: m, Mode: waiterKind(standing)}
		if standing.Since > 0 && standing.Since <= s.Now {
			w.Since = time.UnixMilli(standing.Since)
		}
		switch w.Mode {
		case KindRead:
			w.Owner = strings.TrimPrefix(m, ":r:") // a reader stands in line as ':r:'..owner
		case KindSemaphore:
			// A semaphore's waiter stands in line by holder id; its standing
			// value ends with its owner id (lib_sem.lua).
			if standing.Owner != "" {
				w.Owner = standing.Owner
			}
		}
		if dl, ok := s.Deadlines[m]; ok {
			w.TTL = max(msDur(dl-s.Now), 0)
		}
		st.Line = append(st.Line, w)
	}
	if s.QueueLen > 0 {
		st.Waiters = int(s.QueueLen)
	} else {
		st.Waiters = len(st.Line)
	}
	return st
}

// tokenTime reads a fencing token as the server time it encodes (tokens are
// max(last + 1, server time in µs)); zero when it is not a plausible time
// (a token from a clock far off, or a counter that ran far ahead).
func tokenTime(tok uint64, now time.Time) time.Time {
	if tok == 0 || tok > math.MaxInt64 {
		return time.Time{}
	}
	t := time.UnixMicro(int64(tok))
	if t.After(now.Add(time.Minute)) || t.Before(now.Add(-10*365*24*time.Hour)) {
		return time.Time{}
	}
	return t
}
