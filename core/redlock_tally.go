package core

import (
	"fmt"
	"time"
)

// Tallies: what a RedLock round's replies (fanout.go) add up to, before
// the RedLock decides on them (redlock.go).

// nodeTally counts a round's answers: nodes that still hold the hold
// (status 1; least and most are the smallest and the largest value they
// reported, least -1 and most 0 when none did), nodes that said it is gone,
// and the first failure of the others.
type nodeTally struct {
	held, gone  int
	least, most int64
	err         error
}

// tally counts the replies of a round of renewals, extensions or releases
// whose calls were bounded by bound.
func (a *redlockAttempt) tally(replies []nodeReply, got []bool, bound time.Duration) nodeTally {
	t := nodeTally{least: -1}
	for i, rep := range replies {
		switch {
		case !got[i]:
			t.err = firstOf(t.err, fmt.Errorf("node %d: no reply within %s", i, bound))
		case rep.err != nil:
			t.err = firstOf(t.err, fmt.Errorf("node %d: %w", i, rep.err))
		case rep.status == 1:
			t.held++
			if t.least < 0 || rep.val < t.least {
				t.least = rep.val
			}
			t.most = max(t.most, rep.val)
		default:
			t.gone++
		}
	}
	return t
}

// roundTally counts an acquisition round's answers (bounded by bound):
// the nodes that granted it, and of those the ones that count toward the
// majority; how many answered, and how many of them are young (restarted
// within the guard: see RedLock); ttl, the shortest TTL a refusing node
// reported (-1: none); matures, how long until the oldest young node
// counts; and the first failure of the others.
type roundTally struct {
	granted, counted []int
	answered, young  int
	ttl, matures     time.Duration
	// adult is how long a node must have been up to count.
	adult time.Duration
	err   error
}

// tallyRound counts an acquisition round's replies; guard is the longest
// lease in use, which a node must have been up for to count.
func tallyRound(replies []nodeReply, got []bool, bound, guard time.Duration) roundTally {
	adult := guard + time.Second // a node up for less is young
	t := roundTally{ttl: -1, matures: adult, adult: adult}
	for i, rep := range replies {
		switch {
		case !got[i]:
			t.err = firstOf(t.err, fmt.Errorf("node %d: no reply within %s", i, bound))
			continue
		case rep.err != nil:
			t.err = firstOf(t.err, fmt.Errorf("node %d: %w", i, rep.err))
			continue
		}
		t.answered++
		up := time.Duration(rep.up) * time.Second
		young := rep.up >= 0 && up < adult
		if young {
			t.young++
			t.matures = min(t.matures, adult-up)
		}
		if rep.status == 0 {
			if d := msDur(rep.val); d >= 0 && (t.ttl < 0 || d < t.ttl) {
				t.ttl = d
			}
			continue
		}
		t.granted = append(t.granted, i)
		if !young {
			t.counted = append(t.counted, i)
		}
	}
	if t.young > 0 && t.answered == len(replies) && t.young == t.answered {
		t.counted = t.granted // a fresh deployment: every node is young
	}
	return t
}

// retryIn is the TTL a round without a majority reports: the shortest
// holder's, or sooner, when young nodes granted it, the time until the
// first of them is old enough to count (or a holder's release wakes the
// waiter sooner).
func (t roundTally) retryIn() time.Duration {
	if t.young > 0 && len(t.granted) > len(t.counted) && (t.ttl < 0 || t.matures < t.ttl) {
		return max(t.matures, 0)
	}
	return t.ttl
}

// firstOf keeps the first error.
func firstOf(first, err error) error {
	if first != nil {
		return first
	}
	return err
}
