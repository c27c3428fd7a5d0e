package core_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/keylock/keylock/core"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

// recorder logs observer calls as short strings.
type recorder struct {
	mu  sync.Mutex
	log []string
}

func (r *recorder) add(format string, args ...any) {
	r.mu.Lock()
	r.log = append(r.log, fmt.Sprintf(format, args...))
	r.mu.Unlock()
}

func (r *recorder) lines() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.log...)
}

func (r *recorder) AcquireStart(ctx context.Context, e core.AcquireStartEvent) context.Context {
	r.add("start %s %s wait=%v watchdog=%v label=%s", e.Lock.Kind, e.Lock.Name, e.Wait, e.Watchdog, e.Lock.Label)
	return ctx
}
func (r *recorder) Wait(ctx context.Context, e core.WaitEvent) { r.add("wait %d", e.Attempt) }
func (r *recorder) AcquireEnd(ctx context.Context, e core.AcquireEndEvent) {
	r.add("end %s attempts=%d reentry=%v lease=%v", e.Outcome, e.Attempts, e.Reentry, e.Lease != nil)
}
func (r *recorder) Renew(ctx context.Context, e core.RenewEvent) { r.add("renew %v", e.Err) }
func (r *recorder) ReleaseStart(ctx context.Context, e core.ReleaseEvent) context.Context {
	r.add("release-start")
	return ctx
}
func (r *recorder) ReleaseEnd(ctx context.Context, e core.ReleaseEvent) {
	r.add("release-end released=%v err=%v", e.Released, e.Err)
}
func (r *recorder) Lost(ctx context.Context, e core.LostEvent) { r.add("lost %v", e.Cause) }

func TestObserverSeesTheLifeOfALock(t *testing.T) {
	_, rdb := single(t)
	rec := &recorder{}
	// A lease long enough for a loaded machine's round trips (renewed every
	// 200ms).
	c := newLocks(t, rdb, core.WithObserver(rec), core.WithWatchdogTimeout(600*time.Millisecond))
	other := newLocks(t, rdb)
	ctx := context.Background()

	l := mustLock(t, c.Mutex("obs"), ctx, core.Label("obs:{id}"))
	in := mustLock(t, c.Mutex("obs"), l.Context())
	mustUnlock(t, in)
	time.Sleep(320 * time.Millisecond) // one renewal
	mustUnlock(t, l)

	held := mustLock(t, other.Mutex("obs"), ctx)
	if _, err := c.Mutex("obs").TryLock(ctx); !errors.Is(err, core.ErrLocked) {
		t.Fatalf("TryLock: %v", err)
	}
	mustUnlock(t, held)

	lost := mustLock(t, c.Mutex("obs"), ctx)
	rdb.Del(ctx, "keylock:{obs}")
	waitCause(t, lost.Context(), 2*time.Second)

	got := strings.Join(rec.lines(), "\n")
	want := []string{
		"start mutex obs wait=true watchdog=true label=obs:{id}",
		"end acquired attempts=1 reentry=false lease=true",
		"start mutex obs wait=true watchdog=true label=",
		"end acquired attempts=1 reentry=true lease=true",
		"release-start\nrelease-end released=false err=<nil>",
		"renew <nil>",
		"release-start\nrelease-end released=true err=<nil>",
		"start mutex obs wait=false watchdog=true label=\nend busy attempts=1 reentry=false lease=false",
		"lost keylock: lock lost",
	}
	rest := got
	for _, w := range want {
		i := strings.Index(rest, w)
		if i < 0 {
			t.Fatalf("observer log lacks (in order) %q\ngot:\n%s", w, got)
		}
		rest = rest[i+len(w):]
	}
}

func TestCloseLeavesNoGoroutines(t *testing.T) {
	srv, _ := single(t)
	before := goleak.IgnoreCurrent()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	// A lease long enough not to be lost on a loaded machine, renewed every
	// third of it.
	c := core.New(rdb, core.WithWatchdogTimeout(time.Second))
	ctx := context.Background()
	l := mustLock(t, c.Mutex("leak"), ctx)
	waiting := make(chan error, 1)
	go func() { _, err := c.Mutex("leak").Lock(core.WithOwner(ctx, "other")); waiting <- err }()
	time.Sleep(450 * time.Millisecond) // a renewal ran, the waiter subscribed
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-waiting; !errors.Is(err, core.ErrClosed) {
		t.Fatalf("waiter: %v, want ErrClosed", err)
	}
	_ = l.Unlock(ctx)
	_ = rdb.Close()
	goleak.VerifyNone(t, before)
}
