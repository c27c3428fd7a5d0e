package core_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keylock/keylock/core"
)

// TestKeepRenewsOnlyStandingPlaces runs the keep script on a line set up by
// hand: a place is renewed only while the attempt the call names stands in
// it and its member is in line (a late copy never brings a place back); the
// answer numbers the triples not found; a member named twice takes the last
// deadline; the line's keys live on only when a place was renewed. With
// the lock free, the first waiter is woken and its place cut down to the
// claim window, which the answer reports.
func TestKeepRenewsOnlyStandingPlaces(t *testing.T) {
	_, rdb := single(t)
	ctx := context.Background()
	const (
		lock, queue, deadlines, standing = "keylock:{k}", "keylock:{k}:queue", "keylock:{k}:timeouts", "keylock:{k}:standing"
	)
	setUp := func() {
		t.Helper()
		rdb.Del(ctx, queue, deadlines, standing)
		rdb.RPush(ctx, queue, "a", "b", "c")
		rdb.ZAdd(ctx, deadlines, redis.Z{Score: 1e15, Member: "a"}, redis.Z{Score: 1, Member: "b"}, redis.Z{Score: 1, Member: "c"})
		rdb.HSet(ctx, standing, "a", "ida|30000|t|m|0", "b", "other|30000|t|m|0", "c", "idc|30000|t|m|0")
		rdb.HSet(ctx, lock, "holder", "1")
	}
	var woke int64 // the last keep's: ms left of the woken waiter's place
	keep := func(args ...any) []int64 {
		t.Helper()
		v, err := rdb.Eval(ctx, core.ScriptBody("fair_keep"), []string{lock, queue, deadlines, standing, "keylock:{k}:ch:"},
			append([]any{"publish", "10000", "2000"}, args...)...).Slice()
		if err != nil || len(v) != 2 {
			t.Fatalf("keep: %v, %v; want {lost, woke}", v, err)
		}
		lost, _ := v[0].([]any)
		out := make([]int64, len(lost))
		for i, n := range lost {
			out[i], _ = n.(int64)
		}
		woke, _ = v[1].(int64)
		return out
	}
	now := time.Now().UnixMilli()

	setUp()
	lost := keep("a", "ida", "5000", "b", "idb", "5000", "d", "idd", "5000", "c", "idc", "7000", "a", "ida", "6000")
	if !slices.Equal(lost, []int64{2, 3}) {
		t.Errorf("lost = %v, want [2 3] (b stands for another attempt, d is not in line)", lost)
	}
	for m, want := range map[string]int64{"a": now + 6000, "c": now + 7000} {
		got := int64(rdb.ZScore(ctx, deadlines, m).Val())
		if got < want-1000 || got > want+1000 {
			t.Errorf("deadline of %s = %d, want about %d", m, got, want)
		}
	}
	if got := rdb.ZScore(ctx, deadlines, "b").Val(); got != 1 {
		t.Errorf("deadline of b (another attempt's place) = %v, want it untouched (1)", got)
	}
	if rdb.ZScore(ctx, deadlines, "d").Err() != redis.Nil || rdb.HExists(ctx, standing, "d").Val() {
		t.Error("the keep put d, which was not in line, into the line")
	}
	for _, k := range []string{queue, deadlines, standing} {
		if ttl := rdb.PTTL(ctx, k).Val(); ttl <= 0 || ttl > 10*time.Second {
			t.Errorf("%s: TTL %s after a renewal, want the line's 10s", k, ttl)
		}
	}

	setUp()
	if lost := keep("b", "idb", "5000", "d", "idd", "5000"); !slices.Equal(lost, []int64{1, 2}) {
		t.Errorf("nothing standing: lost = %v, want [1 2]", lost)
	}
	for _, k := range []string{queue, deadlines, standing} {
		if ttl := rdb.PTTL(ctx, k).Val(); ttl != -1 {
			t.Errorf("%s: TTL %s after a keep that renewed nothing, want none set", k, ttl)
		}
	}
	if lost := keep(); len(lost) != 0 {
		t.Errorf("a keep of no place: lost = %v, want none", lost)
	}
	if got := rdb.ZScore(ctx, deadlines, "a").Val(); woke != -1 || got != 1e15 {
		t.Errorf("lock held: woke = %d, a's deadline %v; want -1 and a's place untouched", woke, got)
	}
	// The lock is free: a, first in line, is woken, and its place cut down
	// to the claim window; a keep after that reports what is left of it.
	rdb.Del(ctx, lock)
	keep("a", "ida", "5000")
	if got := int64(rdb.ZScore(ctx, deadlines, "a").Val()); woke != 2000 || got < now || got > now+2000+1000 {
		t.Errorf("lock free: woke = %d, a's deadline %d; want 2000, and a's place, just renewed, cut to about %d", woke, got, now+2000)
	}
	time.Sleep(20 * time.Millisecond)
	if keep(); woke <= 0 || woke >= 2000 {
		t.Errorf("lock free, a woken before: woke = %d, want what is left of a's cut place", woke)
	}
}
