package core

import (
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// Decoders of script replies, in one place. Each script's header (in
// scripts/) says what it returns; these turn that into Go values.

// decodeRenew reads a renewal reply: 1 kept, 0 lost.
func decodeRenew(cmd *redis.Cmd) (bool, error) {
	v, err := cmd.Result()
	if err != nil {
		return false, err
	}
	n, err := toInt64(v)
	return n == 1, err
}

// decodeAcquire reads the {status, value[, left]} reply shared by acquire
// scripts: status 1 fresh (value = token), 2 re-entry (value = token), with
// left = the hold's remaining lease in ms; 0 busy (value = holder's pttl in
// ms; a fair waiter's refusal adds the server's clock and when to recheck),
// -1 more permits asked than a semaphore has (value = its permit count), -2 a copy of an acquisition already resolved (or of a win whose
// hold is gone).
func decodeAcquire(v any) (acquireReply, error) {
	var left, recheck int64
	lined := false
	if arr, ok := v.([]any); ok && len(arr) == 4 {
		n, err := toInt64(arr[3])
		if err != nil {
			return acquireReply{}, err
		}
		recheck, lined, v = n, true, arr[:3]
	}
	if arr, ok := v.([]any); ok && len(arr) == 3 {
		n, err := toInt64(arr[2])
		if err != nil {
			return acquireReply{}, err
		}
		left, v = n, arr[:2]
	}
	status, val, err := pair(v)
	if err != nil {
		return acquireReply{}, err
	}
	switch status {
	case -2:
		return acquireReply{}, errAttemptOver
	case -1:
		return acquireReply{}, &semTooSmallError{size: int(val)}
	case 1, 2:
		return acquireReply{acquired: true, reentry: status == 2, token: uint64(val), left: msDur(left)}, nil
	default:
		rep := acquireReply{ttl: msDur(val), serverNow: left}
		if lined {
			rep.lined, rep.recheck = true, msDur(recheck)
		}
		return rep, nil
	}
}

// decodeRelease reads the reply shared by release scripts: the holds the
// owner still has, or -1 when it held none.
func decodeRelease(cmd *redis.Cmd) (releaseReply, error) {
	v, err := cmd.Result()
	if err != nil {
		return releaseReply{}, err
	}
	n, err := toInt64(v)
	if err != nil {
		return releaseReply{}, err
	}
	return releaseReply{held: n >= 0, remaining: n}, nil
}

// toInt64 decodes an integer that a script returned as an integer or a string.
func toInt64(v any) (int64, error) {
	switch x := v.(type) {
	case int64:
		return x, nil
	case string:
		return strconv.ParseInt(x, 10, 64)
	case nil:
		return 0, fmt.Errorf("nil reply")
	default:
		return 0, fmt.Errorf("unexpected reply type %T", v)
	}
}

// pair decodes a two-element {int, int} script reply.
func pair(v any) (int64, int64, error) {
	arr, ok := v.([]any)
	if !ok || len(arr) != 2 {
		return 0, 0, fmt.Errorf("unexpected reply %v", v)
	}
	a, err := toInt64(arr[0])
	if err != nil {
		return 0, 0, err
	}
	b, err := toInt64(arr[1])
	if err != nil {
		return 0, 0, err
	}
	return a, b, nil
}
