package reply

import (
	"fmt"
	"strconv"
	"strings"
)

// Snapshot is lib_inspect.lua's reply, the state of every key of one lock
// name read at once (inspect_lock returns it, force_unlock the one it took
// before freeing the lock). Which kind of lock the keys belong to, who
// holds it and who waits is for the caller to tell.
type Snapshot struct {
	Now      int64             // the server's clock, in ms
	PTTL     int64             // the lock hash's remaining TTL in ms (<0: no expiry, or no hash)
	Hash     map[string]string // the lock hash (holders and their bookkeeping)
	Fence    uint64            // the last fencing token handed out, 0 when no counter is kept
	QueueLen int64             // the length of the line
	Queue    []string          // its first members, first in line first
	// Deadlines is when each member's place in line runs out (server ms).
	Deadlines map[string]int64
	Readers   []Scored          // RW readers, scored by the end of their lease (ms)
	RCount    map[string]string // RW readers' hold counts and tokens
	Intents   []Scored          // RW write intents
	Expiry    []Scored          // semaphore holders, scored by the end of their lease (ms)
	Size      int64             // the semaphore's stored permit count, 0 when none
	// Standing is each line member's standing attempt (lib_queue.lua).
	Standing map[string]Standing
}

// Scored is one member of a sorted set and its score.
type Scored struct {
	Member string
	Score  int64
}

// Standing is a line member's standing attempt as lib_queue.lua stores it,
// 'id|lease|tag|kind|since[|owner]' ('id|lease|tag|kind|since||due|try' for
// a Mutex's or FairMutex's waiter: when it looks again on its own, and the
// try that was told so; neither is read). A field the value lacks (one written by an older client) is zero.
type Standing struct {
	// Kind is the kind field: 'm' a Mutex's waiter, 'w' or 'r' an RW
	// lock's writer or reader, 's<n>' a semaphore's asking n permits, ""
	// a FairMutex's.
	Kind string
	// Since is when the member joined the line (server ms), 0 when unknown.
	Since int64
	// Owner is the waiter's owner id where its member is not (a
	// semaphore's waiter stands in line by holder id; lib_sem.lua), "" else.
	Owner string
}

// ParseSnapshot decodes lib_inspect.lua's 13-element reply.
func ParseSnapshot(v any) (Snapshot, error) {
	a, ok := v.([]any)
	if !ok || len(a) != 13 {
		return Snapshot{}, fmt.Errorf("unexpected inspect reply %T of %d elements, want 13", v, len(a))
	}
	var s Snapshot
	var err error
	if s.Now, err = Int(a[0]); err != nil {
		return Snapshot{}, fmt.Errorf("inspect reply: server time: %w", err)
	}
	if s.PTTL, err = Int(a[1]); err != nil {
		return Snapshot{}, fmt.Errorf("inspect reply: pttl: %w", err)
	}
	if s.Hash, err = Map(a[2]); err != nil {
		return Snapshot{}, fmt.Errorf("inspect reply: lock hash: %w", err)
	}
	if a[3] != nil {
		n, err := Int(a[3])
		if err != nil {
			return Snapshot{}, fmt.Errorf("inspect reply: fence: %w", err)
		}
		s.Fence = uint64(n)
	}
	if s.QueueLen, err = Int(a[4]); err != nil {
		return Snapshot{}, fmt.Errorf("inspect reply: line length: %w", err)
	}
	if s.Queue, err = Strings(a[5]); err != nil {
		return Snapshot{}, fmt.Errorf("inspect reply: line: %w", err)
	}
	dl, err := WithScores(a[6])
	if err != nil {
		return Snapshot{}, fmt.Errorf("inspect reply: line deadlines: %w", err)
	}
	s.Deadlines = make(map[string]int64, len(dl))
	for _, d := range dl {
		s.Deadlines[d.Member] = d.Score
	}
	if s.Readers, err = WithScores(a[7]); err != nil {
		return Snapshot{}, fmt.Errorf("inspect reply: readers: %w", err)
	}
	if s.RCount, err = Map(a[8]); err != nil {
		return Snapshot{}, fmt.Errorf("inspect reply: reader counts: %w", err)
	}
	if s.Intents, err = WithScores(a[9]); err != nil {
		return Snapshot{}, fmt.Errorf("inspect reply: write intents: %w", err)
	}
	if s.Expiry, err = WithScores(a[10]); err != nil {
		return Snapshot{}, fmt.Errorf("inspect reply: semaphore holders: %w", err)
	}
	if a[11] != nil {
		if s.Size, err = Int(a[11]); err != nil {
			return Snapshot{}, fmt.Errorf("inspect reply: permits: %w", err)
		}
	}
	standing, err := Map(a[12])
	if err != nil {
		return Snapshot{}, fmt.Errorf("inspect reply: standing attempts: %w", err)
	}
	s.Standing = make(map[string]Standing, len(standing))
	for m, st := range standing {
		s.Standing[m] = parseStanding(st)
	}
	return s, nil
}

// parseStanding reads a standing value; what it cannot read stays zero.
func parseStanding(st string) Standing {
	var out Standing
	f := strings.SplitN(st, "|", 6)
	if len(f) >= 4 {
		out.Kind = f[3]
	}
	if len(f) >= 5 {
		// A semaphore's waiter may add ';due;try' to it (lib_queue.lua).
		since, _, _ := strings.Cut(f[4], ";")
		if n, err := strconv.ParseInt(since, 10, 64); err == nil {
			out.Since = n
		}
	}
	if len(f) == 6 && strings.HasPrefix(out.Kind, "s") {
		out.Owner = f[5] // a Mutex's or FairMutex's waiter may add '|due|try'
	}
	return out
}

// WithScores decodes a ZRANGE ... WITHSCORES reply as scripts return it
// (scores as strings).
func WithScores(v any) ([]Scored, error) {
	a, err := Strings(v)
	if err != nil {
		return nil, err
	}
	if len(a)%2 != 0 {
		return nil, fmt.Errorf("odd number of elements (%d) for members and scores", len(a))
	}
	out := make([]Scored, 0, len(a)/2)
	for i := 0; i+1 < len(a); i += 2 {
		f, err := strconv.ParseFloat(a[i+1], 64)
		if err != nil {
			return nil, err
		}
		out = append(out, Scored{Member: a[i], Score: int64(f)})
	}
	return out, nil
}

// Token reads a fencing token as a hash stores it, 0 when s is not one.
func Token(s string) uint64 {
	n, _ := strconv.ParseUint(s, 10, 64)
	return n
}
