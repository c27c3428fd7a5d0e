package reply

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Acquire is the reply of an acquire script.
type Acquire struct {
	Acquired bool   // the hold was won (fresh or re-entered)
	Reentry  bool   // the owner already held it
	Token    uint64 // the hold's fencing token, when acquired
	// Left is the won hold's remaining lease when the script ran; 0: not
	// reported.
	Left time.Duration
	// TTL is the holder's remaining lease when not acquired (<0: unknown).
	TTL time.Duration
	// ServerNow is the server's clock (ms) when a refusal was made, if the
	// script reports it (a fair waiter's).
	ServerNow int64
	// Lined: a refusal that left the attempt standing in a line, and
	// Recheck when it should look again (<0: not before it is pushed).
	Lined   bool
	Recheck time.Duration
	// Over: a copy of an attempt already resolved (or of a win whose hold
	// is gone); nothing was done.
	Over bool
	// TooSmall: more permits were asked than the semaphore has; Size is
	// its permit count.
	TooSmall bool
	Size     int
}

// ParseAcquire reads the {status, value[, left[, recheck]]} reply shared
// by acquire scripts: status 1 fresh (value = token), 2 re-entry (value =
// token), with left = the hold's remaining lease in ms; 0 busy (value =
// holder's pttl in ms; a fair waiter's refusal adds the server's clock and
// when to recheck), -1 more permits asked than a semaphore has (value = its
// permit count), -2 a copy of an acquisition already resolved (or of a win
// whose hold is gone).
func ParseAcquire(v any) (Acquire, error) {
	var left, recheck int64
	lined := false
	if arr, ok := v.([]any); ok && len(arr) == 4 {
		n, err := Int(arr[3])
		if err != nil {
			return Acquire{}, err
		}
		recheck, lined, v = n, true, arr[:3]
	}
	if arr, ok := v.([]any); ok && len(arr) == 3 {
		n, err := Int(arr[2])
		if err != nil {
			return Acquire{}, err
		}
		left, v = n, arr[:2]
	}
	status, val, err := Pair(v)
	if err != nil {
		return Acquire{}, err
	}
	switch status {
	case -2:
		return Acquire{Over: true}, nil
	case -1:
		return Acquire{TooSmall: true, Size: int(val)}, nil
	case 1, 2:
		return Acquire{Acquired: true, Reentry: status == 2, Token: uint64(val), Left: ms(left)}, nil
	default:
		rep := Acquire{TTL: ms(val), ServerNow: left}
		if lined {
			rep.Lined, rep.Recheck = true, ms(recheck)
		}
		return rep, nil
	}
}

// Released is a release script's answer.
type Released struct {
	// Remaining is the holds the owner still has, or -1 when the hold was
	// gone (Held false).
	Remaining int64
	Held      bool
	// Handed are the push payloads ('g …') of the grants the release made
	// to waiters of the releasing Client, returned instead of published.
	Handed []string
	// Woke is, when the release woke a fixed-LeaseTime waiter to take the
	// lock itself, how long that waiter's place lasts ('c <ms>', at least
	// 1ms); 0: none.
	Woke time.Duration
}

// Release reads the reply shared by release scripts: n, the holds the
// owner still has (-1: the hold was gone), or {n, item, …} whose items are
// grants the release made to waiters of the releasing Client ('g …') and
// the place of a waiter it woke ('c <ms>').
func Release(cmd *redis.Cmd) (Released, error) {
	v, err := cmd.Result()
	if err != nil {
		return Released{}, err
	}
	var rep Released
	if arr, ok := v.([]any); ok {
		if len(arr) < 2 {
			return Released{}, fmt.Errorf("unexpected release reply of %d elements", len(arr))
		}
		for _, item := range arr[1:] {
			p, _ := item.(string)
			switch {
			case strings.HasPrefix(p, "g "):
				rep.Handed = append(rep.Handed, p)
			case strings.HasPrefix(p, "c ") && rep.Woke == 0:
				n, err := strconv.ParseInt(p[2:], 10, 64)
				if err != nil || n < 0 {
					return Released{}, fmt.Errorf("unexpected woken place %q", p)
				}
				rep.Woke = ms(max(n, 1))
			default:
				return Released{}, fmt.Errorf("unexpected release reply item %v", item)
			}
		}
		v = arr[0]
	}
	n, err := Int(v)
	if err != nil {
		return Released{}, err
	}
	rep.Remaining, rep.Held = n, n >= 0
	return rep, nil
}

// Renew reads a renewal reply: 1 kept, 0 lost.
func Renew(cmd *redis.Cmd) (bool, error) {
	v, err := cmd.Result()
	if err != nil {
		return false, err
	}
	return Kept(v)
}

// Kept reads one renewal's outcome, on its own or an item of a batch: 1
// kept, 0 lost.
func Kept(v any) (bool, error) {
	n, err := Int(v)
	return n == 1, err
}

// Batch reads renew_batch's reply: one outcome per item ([Kept]), n of
// them.
func Batch(cmd *redis.Cmd, n int) ([]any, error) {
	v, err := cmd.Result()
	if err != nil {
		return nil, err
	}
	arr, ok := v.([]any)
	if !ok || len(arr) != n {
		return nil, fmt.Errorf("keylock: renew_batch: unexpected reply %T of %d items, want %d", v, len(arr), n)
	}
	return arr, nil
}

// Extend reads an extend script's reply: the hold's remaining lease, or
// held false when the hold is gone (-1).
func Extend(cmd *redis.Cmd) (left time.Duration, held bool, err error) {
	v, err := cmd.Result()
	if err != nil {
		return 0, false, err
	}
	n, err := Int(v)
	if err != nil || n < 0 {
		return 0, false, err
	}
	return ms(n), true, nil
}

// Round reads redlock_acquire's reply on one node: {status, value[, up]},
// status and value as [ParseAcquire]'s, up the node's uptime in seconds
// (-1 when the reply has none).
func Round(v any) (status, val, up int64, err error) {
	arr, ok := v.([]any)
	if !ok || len(arr) < 2 || len(arr) > 3 {
		return 0, 0, 0, fmt.Errorf("unexpected reply %v", v)
	}
	up = -1
	for j, p := range []*int64{&status, &val, &up}[:len(arr)] {
		if *p, err = Int(arr[j]); err != nil {
			return 0, 0, 0, err
		}
	}
	return status, val, up, nil
}
