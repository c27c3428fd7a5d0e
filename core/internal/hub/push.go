package hub

import (
	"strconv"
	"strings"
	"time"
)

// The pushes a release publishes to one attempt's waiter on its Client's
// channel of a lock (a fair lock's, or a contended Mutex's): a grant
// 'g <attempt id> <token> <server ms> <lease ms>', a wake-up 'w <attempt
// id>', and the next-in-line notice 'n <attempt id> <ms>'. Any other payload
// is a count of local waiters to wake (a plain channel).

// ParseGrant decodes a grant push: 'g <id> <token> <server ms> <lease ms>'.
func ParseGrant(payload string) (id string, token uint64, at int64, lease time.Duration, ok bool) {
	rest, found := strings.CutPrefix(payload, "g ")
	if !found {
		return "", 0, 0, 0, false
	}
	f := strings.Split(rest, " ")
	if len(f) != 4 || f[0] == "" {
		return "", 0, 0, 0, false
	}
	token, err1 := strconv.ParseUint(f[1], 10, 64)
	at, err2 := strconv.ParseInt(f[2], 10, 64)
	l, err3 := strconv.ParseInt(f[3], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || l <= 0 {
		return "", 0, 0, 0, false
	}
	return f[0], token, at, time.Duration(l) * time.Millisecond, true
}

// ParseNext decodes a 'n <attempt id> <ms>' push: the waiter in front of
// that attempt was granted the lock with a claim window of ms.
func ParseNext(payload string) (id string, after time.Duration, ok bool) {
	rest, found := strings.CutPrefix(payload, "n ")
	if !found {
		return "", 0, false
	}
	id, n, found := strings.Cut(rest, " ")
	ms, err := strconv.ParseInt(n, 10, 64)
	if !found || id == "" || err != nil || ms <= 0 {
		return "", 0, false
	}
	return id, time.Duration(ms) * time.Millisecond, true
}
