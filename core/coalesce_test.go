package core_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keylock/keylock/core"
)

// scriptPipelines counts pipelines that carry more than one script call.
type scriptPipelines struct{ n atomic.Int64 }

func (*scriptPipelines) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (*scriptPipelines) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (p *scriptPipelines) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		scripts := 0
		for _, c := range cmds {
			if name := strings.ToLower(c.Name()); name == "evalsha" || name == "eval" {
				scripts++
			}
		}
		if scripts > 1 {
			p.n.Add(1)
		}
		return next(ctx, cmds)
	}
}

// TestConcurrentCallsShareRoundTrips: many goroutines taking and giving
// back locks of their own through one Client at once share pipelines, and
// every caller gets its own reply: each lease is the hold Redis has (owner
// and fencing token), and each Unlock finds it.
func TestConcurrentCallsShareRoundTrips(t *testing.T) {
	_, rdb := single(t)
	var pipes scriptPipelines
	rdb.AddHook(&pipes)
	lockAtOnce(t, newLocks(t, rdb), 48, 30)
	if pipes.n.Load() == 0 {
		t.Errorf("48 goroutines locking at once: no pipeline carried more than one script call")
	}
	t.Logf("%d pipelines of script calls", pipes.n.Load())
}

// TestSharedRoundTripsOption: WithSharedRoundTrips(0) sends every call
// alone (no pipeline of scripts, as hooks see), and a limit of 1 shares
// round trips among as few as two goroutines; each lease is still the hold
// Redis has.
func TestSharedRoundTripsOption(t *testing.T) {
	for _, tc := range []struct {
		n, goroutines int
		pipelines     bool
	}{{0, 48, false}, {1, 4, true}} {
		t.Run(fmt.Sprintf("n=%d", tc.n), func(t *testing.T) {
			_, rdb := single(t)
			var pipes scriptPipelines
			rdb.AddHook(&pipes)
			lockAtOnce(t, newLocks(t, rdb, core.WithSharedRoundTrips(tc.n)), tc.goroutines, 30)
			if got := pipes.n.Load() > 0; got != tc.pipelines {
				t.Errorf("WithSharedRoundTrips(%d), %d goroutines: %d pipelines of script calls; want any: %v", tc.n, tc.goroutines, pipes.n.Load(), tc.pipelines)
			}
		})
	}
	defer func() {
		if recover() == nil {
			t.Error("WithSharedRoundTrips(-1) did not panic")
		}
	}()
	core.WithSharedRoundTrips(-1)
}

// lockAtOnce has goroutines goroutines take and give back a lock of their
// own ops times each through c, checking that every lease is the hold
// Redis has (owner and fencing token).
func lockAtOnce(t *testing.T, c *core.Client, goroutines, ops int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name, owner := fmt.Sprintf("coalesce:%d", g), fmt.Sprintf("owner-%d", g)
			ctx := core.WithOwner(context.Background(), owner)
			m := c.Mutex(name)
			var last uint64
			for range ops {
				l, err := m.Lock(ctx)
				if err != nil {
					errs <- fmt.Errorf("%s: Lock: %w", name, err)
					return
				}
				st, err := c.Inspect(context.Background(), name)
				switch {
				case err != nil:
					errs <- fmt.Errorf("%s: Inspect: %w", name, err)
					return
				case l.Name() != name || l.Owner() != owner || l.Token() <= last:
					errs <- fmt.Errorf("%s: lease of %q by %q, token %d after %d", name, l.Name(), l.Owner(), l.Token(), last)
					return
				case !st.Held || len(st.Holders) != 1 || st.Holders[0].Owner != owner || st.Token != l.Token():
					errs <- fmt.Errorf("%s: lease token %d, Redis has %+v", name, l.Token(), st)
					return
				}
				last = l.Token()
				if err := l.Unlock(ctx); err != nil {
					errs <- fmt.Errorf("%s: Unlock: %w", name, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestQueuedCallLeavesAtItsContext: with Redis stalled (a script that runs for a second) and
// the Client's calls in flight, a Lock whose context ends returns at once;
// its call was never sent, and nothing of it is held once Redis is back.
// The calls stalled in flight complete.
func TestQueuedCallLeavesAtItsContext(t *testing.T) {
	srv, rdb := single(t)
	c := newLocks(t, rdb)
	ctx := context.Background()
	mustUnlock(t, mustLock(t, c.Mutex("warm"), ctx)) // scripts loaded

	stall := srv.NewClient(t)
	stalled := make(chan error, 1)
	go func() { stalled <- stallRedis(ctx, stall, time.Second) }()
	time.Sleep(100 * time.Millisecond)

	const inFlight = 12 // more than the Client sends at once
	held := make(chan *core.Lease, inFlight)
	for i := range inFlight {
		go func() {
			l, err := c.Mutex(fmt.Sprintf("stalled:%d", i)).Lock(ctx)
			if err != nil {
				t.Errorf("stalled:%d: %v", i, err)
			}
			held <- l
		}()
	}
	time.Sleep(100 * time.Millisecond)
	// A cancellable context without a deadline, as a request's: the call
	// runs on the caller's goroutine, and waits in the Client's queue.
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	_, err := c.Mutex("left").Lock(lctx)
	if took := time.Since(start); !errors.Is(err, context.Canceled) || took > 400*time.Millisecond {
		t.Fatalf("Lock with Redis stalled: %v after %v; want context.Canceled when it is cancelled, at 100ms", err, took)
	}
	if err := <-stalled; err != nil {
		t.Fatal(err)
	}
	for range inFlight {
		if l := <-held; l != nil {
			mustUnlock(t, l)
		}
	}
	time.Sleep(200 * time.Millisecond) // a give-back of the call that left, had it been sent
	st, err := c.Inspect(ctx, "left")
	if err != nil {
		t.Fatal(err)
	}
	if st.Held || st.LastToken != 0 {
		t.Errorf("the Lock that left before its call was sent: %+v; want nothing stored", st)
	}
}

// TestCoalescedCallsUnderCancellation: goroutines lock and unlock with
// contexts that end at random moments (at deadlines, or cancelled) while
// Redis stalls for 20ms every 50ms.
// Every Lock that returned a lease holds the lock until Unlock, and once
// all is over nothing is held (calls that were left are settled or
// retried, never lost).
func TestCoalescedCallsUnderCancellation(t *testing.T) {
	srv, rdb := single(t)
	c := newLocks(t, rdb)
	ctx := context.Background()
	stall := srv.NewClient(t)
	stop := make(chan struct{})
	var stalls sync.WaitGroup
	stalls.Add(1)
	go func() {
		defer stalls.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			_ = stallRedis(ctx, stall, 20*time.Millisecond)
		}
	}()

	const goroutines, ops = 32, 60
	names := make([]string, goroutines)
	var wg sync.WaitGroup
	var won, left atomic.Int64
	for g := range goroutines {
		names[g] = fmt.Sprintf("cancel:%d", g)
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := c.Mutex(names[g])
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			for range ops {
				octx, cancel := cancelledSoon(ctx, rng)
				l, err := m.Lock(octx)
				cancel()
				if err != nil {
					if left.Add(1) == 1 {
						t.Log(err)
					}
					continue
				}
				won.Add(1)
				st, err := c.Inspect(ctx, names[g])
				if err == nil && (!st.Held || st.Token != l.Token()) {
					t.Errorf("%s: lease token %d while Redis has %+v", names[g], l.Token(), st)
				}
				uctx, cancel := cancelledSoon(ctx, rng)
				_ = l.Unlock(uctx) // may give up: retried in the background
				cancel()
			}
		}()
	}
	wg.Wait()
	close(stop)
	stalls.Wait()
	t.Logf("%d won, %d left", won.Load(), left.Load())
	if won.Load() == 0 || left.Load() == 0 {
		t.Fatalf("%d won, %d left: the run checked nothing", won.Load(), left.Load())
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		states, err := c.InspectNames(ctx, names)
		if err != nil {
			t.Fatal(err)
		}
		var held []string
		for _, st := range states {
			if st.Held {
				held = append(held, st.Name)
			}
		}
		if len(held) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still held 10s after the run: %v", held)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// cancelledSoon returns a context that ends within 8ms (one in four within
// 200ms): at a deadline (its calls run on a Client goroutine), or cancelled
// without one, as a request's context (its calls run on the caller's
// goroutine).
func cancelledSoon(ctx context.Context, rng *rand.Rand) (context.Context, context.CancelFunc) {
	d := time.Duration(rng.IntN(8000)) * time.Microsecond
	if rng.IntN(4) == 0 {
		// Some calls have time to finish, also on a machine so busy that
		// a round trip takes longer than 8ms.
		d = time.Duration(rng.IntN(200)) * time.Millisecond
	}
	if rng.IntN(2) == 0 {
		return context.WithTimeout(ctx, d)
	}
	ctx, cancel := context.WithCancel(ctx)
	t := time.AfterFunc(d, cancel)
	return ctx, func() { t.Stop(); cancel() }
}

// stallRedis keeps the server busy for d with a script that reads the clock
// until d has passed: nothing else runs meanwhile.
func stallRedis(ctx context.Context, rdb *redis.Client, d time.Duration) error {
	const spin = `local t = redis.call('time')
local from = t[1] * 1000000 + t[2]
repeat t = redis.call('time') until t[1] * 1000000 + t[2] - from >= tonumber(ARGV[1])
return 1`
	return rdb.Eval(ctx, spin, nil, d.Microseconds()).Err()
}

// waitQueued waits until n of c's script calls wait in its queue.
func waitQueued(t *testing.T, c *core.Client, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, q := core.Coalescing(c); q == n {
			return
		}
		if time.Now().After(deadline) {
			_, q := core.Coalescing(c)
			t.Fatalf("%d calls queued, want %d", q, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestQueuedCallerLeavingAsItIsToSend: a queued caller chosen to send the
// next pipeline just as its context is cancelled leaves, and the pipeline
// is still sent (by a Client goroutine): nothing waits forever, the lock it
// may have won is given back, and the calls in flight are counted right.
func TestQueuedCallerLeavingAsItIsToSend(t *testing.T) {
	_, rdb := single(t)
	c := newLocks(t, rdb)
	ctx := context.Background()
	mustUnlock(t, mustLock(t, c.Mutex("warm"), ctx)) // scripts loaded
	m := c.Mutex("leaving")
	var won, raced int
	for i := range 100 {
		endOne, endAll := core.FillCoalescer(c)
		lctx, cancel := context.WithCancel(ctx)
		res := make(chan *core.Lease, 1)
		go func() {
			l, err := m.Lock(lctx)
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Error(err)
			}
			res <- l
		}()
		// Wait for the call to queue. A give-back of an earlier round
		// (settling a call that was left) may still be in flight: when it
		// ends it lets the queue out, and then the round tests nothing.
		var l *core.Lease
		queued, gone := false, false
		for !queued && !gone {
			select {
			case l = <-res:
				gone = true
			default:
				_, q := core.Coalescing(c)
				queued = q > 0
				time.Sleep(100 * time.Microsecond)
			}
		}
		if queued {
			raced++
			if i%2 == 0 { // both orders: the select sees both at once either way
				cancel()
				endOne()
			} else {
				endOne()
				cancel()
			}
			l = <-res
		}
		cancel()
		endAll()
		if l != nil {
			won++
			mustUnlock(t, l)
		}
		deadline := time.Now().Add(5 * time.Second)
		for {
			inFlight, queued := core.Coalescing(c)
			st, err := c.Inspect(ctx, "leaving")
			if err != nil {
				t.Fatal(err)
			}
			if inFlight == 0 && queued == 0 && !st.Held {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("round %d: %d calls in flight, %d queued, held %v; want none, none, not held", i, inFlight, queued, st.Held)
			}
			time.Sleep(time.Millisecond)
		}
	}
	t.Logf("%d of 100 rounds raced the cancellation with the pipeline's turn, %d won the lock", raced, won)
	if raced < 50 {
		t.Errorf("only %d of 100 rounds queued the call", raced)
	}
}

// TestQueuedCallsAfterScriptFlush: a pipeline of queued calls that meets
// NOSCRIPT (the server lost its scripts) is sent again with the scripts'
// bodies, and every caller gets its lock.
func TestQueuedCallsAfterScriptFlush(t *testing.T) {
	_, rdb := single(t)
	c := newLocks(t, rdb)
	ctx := context.Background()
	mustUnlock(t, mustLock(t, c.Mutex("warm"), ctx))
	endOne, endAll := core.FillCoalescer(c)
	defer endAll()
	const n = 3
	res := make(chan error, n)
	for i := range n {
		go func() {
			l, err := c.Mutex(fmt.Sprintf("flushed:%d", i)).Lock(ctx)
			if err == nil {
				err = l.Unlock(ctx)
			}
			res <- err
		}()
	}
	waitQueued(t, c, n)
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	endOne()
	for range n {
		if err := <-res; err != nil {
			t.Error(err)
		}
	}
}

// TestQueuedCallerToSendLeavesAtItsDeadline: with go-redis ending calls at
// their deadlines (ContextTimeoutEnabled), a queued Lock chosen to send the
// next pipeline while Redis is stalled still returns at its deadline: the
// pipeline goes out on a Client goroutine.
func TestQueuedCallerToSendLeavesAtItsDeadline(t *testing.T) {
	srv, _ := single(t)
	rdb := srv.NewClient(t, func(o *redis.Options) { o.ContextTimeoutEnabled = true })
	c := newLocks(t, rdb)
	ctx := context.Background()
	mustUnlock(t, mustLock(t, c.Mutex("warm"), ctx))

	endOne, endAll := core.FillCoalescer(c)
	lctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	type result struct {
		l   *core.Lease
		err error
		at  time.Duration
	}
	res := make(chan result, 1)
	start := time.Now()
	go func() {
		l, err := c.Mutex("deadline").Lock(lctx)
		res <- result{l, err, time.Since(start)}
	}()
	waitQueued(t, c, 1)
	stalled := make(chan error, 1)
	go func() { stalled <- stallRedis(ctx, srv.NewClient(t), time.Second) }()
	time.Sleep(50 * time.Millisecond) // the stall has begun
	endOne()                          // the queued Lock is to send the next pipeline
	r := <-res
	if !errors.Is(r.err, context.DeadlineExceeded) || r.at > 600*time.Millisecond {
		t.Errorf("Lock with Redis stalled: %v after %v; want context.DeadlineExceeded at its 300ms deadline", r.err, r.at)
	}
	if err := <-stalled; err != nil {
		t.Fatal(err)
	}
	endAll()
	if r.l != nil {
		mustUnlock(t, r.l)
	}
	deadline := time.Now().Add(5 * time.Second)
	for { // what the pipeline won is given back
		st, err := c.Inspect(ctx, "deadline")
		if err != nil {
			t.Fatal(err)
		}
		if !st.Held {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still held 5s after the Lock left: %+v", st)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestCloseTakesSharedWaitersOutOfLine: waiters of a Client that shares
// round trips from two calls at once (WithSharedRoundTrips(1)) all stand in
// a line when the Client closes. Their Locks return ErrClosed and give up
// their places at once — the give-backs go out together, and none may be
// queued into a pipeline that Close has already ended — so the holder's
// release grants the lock to nobody of the closed Client.
func TestCloseTakesSharedWaitersOutOfLine(t *testing.T) {
	for _, kind := range []string{"fair", "rw-write", "mutex"} {
		t.Run(kind, func(t *testing.T) {
			_, rdb := single(t)
			other := newLocks(t, rdb)
			c := core.New(rdb, core.WithSharedRoundTrips(1))
			defer c.Close()
			const name, waiters = "closing-line", 6
			locker := func(cl *core.Client) core.Locker {
				switch kind {
				case "fair":
					return cl.FairMutex(name)
				case "rw-write":
					return cl.RWMutex(name)
				}
				return cl.Mutex(name)
			}
			ctx := context.Background()
			held := mustLock(t, locker(other), ctx)
			errs := make(chan error, waiters)
			for range waiters {
				go func() {
					_, err := locker(c).Lock(ctx)
					errs <- err
				}()
			}
			if !eventually(5*time.Second, func() bool { return len(inspect(t, other, name).Line) == waiters }) {
				t.Fatalf("%d waiters did not stand in line: %+v", waiters, inspect(t, other, name).Line)
			}
			_ = c.Close()
			for range waiters {
				if err := <-errs; !errors.Is(err, core.ErrClosed) {
					t.Fatalf("a waiting Lock after Close: err = %v, want ErrClosed", err)
				}
			}
			// Every Lock gave its place up before returning.
			if line := inspect(t, other, name).Line; len(line) != 0 {
				t.Fatalf("the closed Client's Locks returned, %d places are still in line: %+v", len(line), line)
			}
			mustUnlock(t, held)
			if st := inspect(t, other, name); st.Held {
				t.Fatalf("after the holder's release the lock went to the closed Client: %s", holdsNow(st))
			}
		})
	}
}

// TestUnlockAfterCloseReleases: leases Unlocked after their Client closed
// (a deferred Unlock in a handler while the service shuts down), many at
// once on a Client that shares round trips, are each released in Redis
// under the caller's context: a call made after Close is never queued into
// a pipeline that Close has ended.
func TestUnlockAfterCloseReleases(t *testing.T) {
	_, rdb := single(t)
	insp := newLocks(t, rdb)
	c := core.New(rdb, core.WithSharedRoundTrips(1))
	const n = 6
	ctx := context.Background()
	leases := make([]*core.Lease, n)
	for i := range leases {
		leases[i] = mustLock(t, c.Mutex(fmt.Sprintf("after-close:%d", i)), ctx)
	}
	_ = c.Close()
	errs := make(chan error, n)
	for _, l := range leases {
		go func() { errs <- l.Unlock(ctx) }()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Errorf("Unlock after Close: %v", err)
		}
	}
	for i := range leases {
		if name := fmt.Sprintf("after-close:%d", i); heldNow(insp, name) {
			t.Errorf("%s is still held after its lease was Unlocked", name)
		}
	}
}
