package core_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keylock/keylock/core"
)

func TestRWReadersShareWriterExcludes(t *testing.T) {
	srv, _ := single(t)
	c1, c2 := newLocks(t, srv.NewClient(t)), newLocks(t, srv.NewClient(t))
	ctx := ctxTimeout(t, 30*time.Second)

	// Two readers at once; a writer is refused while they read.
	r1 := mustLock(t, c1.RWMutex("rw").RLocker(), ctx)
	r2, err := c2.RWMutex("rw").TryRLock(ctx)
	if err != nil {
		t.Fatalf("second reader: %v, want readers to share", err)
	}
	if r1.Kind() != core.KindRead || r1.Token() == r2.Token() {
		t.Fatalf("readers: kind %q, tokens %d and %d; want read leases with their own tokens", r1.Kind(), r1.Token(), r2.Token())
	}
	if _, err := c2.RWMutex("rw").TryLock(ctx); !errors.Is(err, core.ErrLocked) {
		t.Fatalf("writer while two read: %v, want ErrLocked", err)
	}
	mustUnlock(t, r1)
	mustUnlock(t, r2)
	w := mustLock(t, c1.RWMutex("rw"), ctx)
	if _, err := c2.RWMutex("rw").TryRLock(ctx); !errors.Is(err, core.ErrLocked) {
		t.Fatalf("reader while one writes: %v, want ErrLocked", err)
	}
	mustUnlock(t, w)

	// Under load: overlap counters.
	const readers, writers, rounds = 6, 2, 25
	var reading, writing, maxReading, violations atomic.Int64
	var wg sync.WaitGroup
	for i := range readers + writers {
		c := []*core.Client{c1, c2}[i%2]
		isWriter := i >= readers
		wg.Go(func() {
			rw := c.RWMutex("rw")
			for range rounds {
				if isWriter {
					l, err := rw.Lock(ctx)
					if err != nil {
						t.Errorf("Lock: %v", err)
						return
					}
					if writing.Add(1) != 1 || reading.Load() != 0 {
						violations.Add(1)
					}
					time.Sleep(200 * time.Microsecond)
					writing.Add(-1)
					mustUnlockE(t, l)
					continue
				}
				l, err := rw.RLock(ctx)
				if err != nil {
					t.Errorf("RLock: %v", err)
					return
				}
				n := reading.Add(1)
				for m := maxReading.Load(); n > m && !maxReading.CompareAndSwap(m, n); m = maxReading.Load() {
				}
				if writing.Load() != 0 {
					violations.Add(1)
				}
				time.Sleep(time.Millisecond)
				reading.Add(-1)
				mustUnlockE(t, l)
			}
		})
	}
	wg.Wait()
	if v := violations.Load(); v != 0 {
		t.Fatalf("%d critical sections overlapped a writer, want 0", v)
	}
	if m := maxReading.Load(); m < 2 {
		t.Fatalf("at most %d readers at once, want readers to overlap", m)
	}
}

func mustUnlockE(t *testing.T, l *core.Lease) {
	if err := l.Unlock(context.Background()); err != nil {
		t.Errorf("Unlock %s %q: %v", l.Kind(), l.Name(), err)
	}
}

func TestRWWriterNotStarvedByReaders(t *testing.T) {
	srv, _ := single(t)
	rc, wc := newLocks(t, srv.NewClient(t)), newLocks(t, srv.NewClient(t))
	ctx := ctxTimeout(t, 30*time.Second)

	// Readers overlap so that the lock is never free of readers.
	stop := make(chan struct{})
	var reads atomic.Int64
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			time.Sleep(time.Duration(i) * 3 * time.Millisecond)
			for {
				select {
				case <-stop:
					return
				default:
				}
				l, err := rc.RWMutex("starve").RLock(ctx)
				if err != nil {
					t.Errorf("RLock: %v", err)
					return
				}
				reads.Add(1)
				time.Sleep(10 * time.Millisecond)
				mustUnlockE(t, l)
			}
		})
	}
	defer func() { close(stop); wg.Wait() }()
	for reads.Load() < 8 {
		time.Sleep(time.Millisecond)
	}
	// Without write intents this writer would wait for a gap that never
	// comes; with them it waits for the readers present when it arrived.
	l, err := wc.RWMutex("starve").Lock(ctx, core.WaitTimeout(5*time.Second))
	if err != nil {
		t.Fatalf("writer under a stream of readers: %v, want the lock within 5s", err)
	}
	mustUnlock(t, l)
}

func TestRWCrashedReaderDoesNotPinTheLock(t *testing.T) {
	srv, _ := single(t)
	const lease = 300 * time.Millisecond
	crashing := newLocks(t, srv.NewClient(t), core.WithWatchdogTimeout(lease))
	alive := newLocks(t, srv.NewClient(t), core.WithWatchdogTimeout(lease))
	writer := newLocks(t, srv.NewClient(t))
	ctx := ctxTimeout(t, 30*time.Second)

	_ = mustLock(t, crashing.RWMutex("pin").RLocker(), ctx)
	live := mustLock(t, alive.RWMutex("pin").RLocker(), ctx)
	_ = crashing.Close() // no unlock, no more renewals

	// The live reader is renewed on its own: after several leases the
	// writer is still refused because of it, not because of the dead one.
	time.Sleep(3 * lease)
	if err := live.Context().Err(); err != nil {
		t.Fatalf("live reader lost its lease: %v", context.Cause(live.Context()))
	}
	if _, err := writer.RWMutex("pin").TryLock(ctx); !errors.Is(err, core.ErrLocked) {
		t.Fatalf("writer while a live reader reads: %v, want ErrLocked", err)
	}
	mustUnlock(t, live)
	l, err := writer.RWMutex("pin").TryLock(ctx)
	if err != nil {
		t.Fatalf("writer after the live reader left and the crashed one's lease ran out: %v, want the lock", err)
	}
	mustUnlock(t, l)
}

func TestRWReentryAndWriterReads(t *testing.T) {
	_, rdb := single(t)
	c := newLocks(t, rdb)
	ctx := context.Background()
	rw := c.RWMutex("rw-re")

	w := mustLock(t, rw, ctx)
	w2 := mustLock(t, rw, w.Context())
	r := mustLock(t, rw.RLocker(), w.Context()) // the writer may read
	if w2.Token() != w.Token() {
		t.Fatalf("write re-entry token %d, want %d", w2.Token(), w.Token())
	}
	if _, err := rw.TryRLock(ctx); !errors.Is(err, core.ErrLocked) {
		t.Fatalf("another owner reading while written: %v, want ErrLocked", err)
	}
	mustUnlock(t, w2)
	mustUnlock(t, w)
	// The write lock is gone; the owner still reads, others may join.
	other := mustLock(t, rw.RLocker(), ctx)
	r2 := mustLock(t, rw.RLocker(), core.WithOwner(ctx, r.Owner())) // r's context ended with the write lease it derives from
	if r2.Token() != r.Token() {
		t.Fatalf("read re-entry token %d, want %d", r2.Token(), r.Token())
	}
	if got := rdb.HGet(ctx, "keylock:{rw-re}:rcount", r.Owner()).Val(); got != "2" {
		t.Fatalf("read holds = %q, want 2", got)
	}
	for _, l := range []*core.Lease{r2, r, other} {
		mustUnlock(t, l)
	}
	// A lone reader may upgrade to the write lock.
	solo := mustLock(t, rw.RLocker(), ctx)
	up, err := rw.TryLock(solo.Context())
	if err != nil {
		t.Fatalf("upgrade by the only reader: %v", err)
	}
	mustUnlock(t, up)
	mustUnlock(t, solo)
	if n := rdb.Exists(ctx, "keylock:{rw-re}", "keylock:{rw-re}:readers", "keylock:{rw-re}:rcount", "keylock:{rw-re}:intents").Val(); n != 0 {
		t.Fatalf("keys left after every hold was released: %d, want 0", n)
	}
}

// A writer that gives up withdraws its intent: readers get in at once.
func TestRWWriterThatGivesUpLetsReadersIn(t *testing.T) {
	_, rdb := single(t)
	c := newLocks(t, rdb)
	ctx := ctxTimeout(t, 30*time.Second)
	rw := c.RWMutex("quit")
	r := mustLock(t, rw.RLocker(), ctx)
	if _, err := rw.Lock(ctx, core.WaitTimeout(50*time.Millisecond)); !errors.Is(err, core.ErrLocked) {
		t.Fatalf("writer behind a reader: %v, want ErrLocked after its wait", err)
	}
	// The intent is withdrawn on a Client-owned goroutine right after Lock
	// returned: well before it would lapse (writeIntentTTL, 3s).
	deadline := time.Now().Add(time.Second)
	for rdb.ZCard(ctx, "keylock:{quit}:intents").Val() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the write intent is still there 1s after the writer gave up")
		}
		time.Sleep(5 * time.Millisecond)
	}
	r2, err := rw.TryRLock(ctx)
	if err != nil {
		t.Fatalf("new reader after the writer gave up: %v", err)
	}
	mustUnlock(t, r2)
	mustUnlock(t, r)
}

// A reader's bookkeeping never lands on another reader's fields, whatever
// the owner ids: the readers 'w:x', 'f:x' and 'g:x' beside a reader 'x'
// that holds a watchdog read and a fixed-lease one keep their reads
// through renewals and release them cleanly.
func TestRWReaderOwnerIDsDoNotCollide(t *testing.T) {
	_, rdb := single(t)
	rw := newLocks(t, rdb, core.WithWatchdogTimeout(900*time.Millisecond)).RWMutex("ids")
	bg := context.Background()
	var leases []*core.Lease
	for _, owner := range []string{"w:x", "f:x", "g:x", "x"} {
		leases = append(leases, mustLock(t, rw.RLocker(), core.WithOwner(bg, owner)))
	}
	leases = append(leases, mustLock(t, rw.RLocker(), core.WithOwner(bg, "x"), core.LeaseTime(5*time.Second)))
	time.Sleep(2 * time.Second) // two renewals of each watchdog read
	for _, l := range leases {
		if err := l.Context().Err(); err != nil {
			t.Errorf("%s lost its read: %v", l.Owner(), context.Cause(l.Context()))
		}
		if err := l.Unlock(bg); err != nil {
			t.Errorf("Unlock of %s's read: %v", l.Owner(), err)
		}
	}
	if n := rdb.Exists(bg, "keylock:{ids}:readers", "keylock:{ids}:rcount").Val(); n != 0 {
		t.Errorf("%d of the readers' keys left after every read was released", n)
	}
}
