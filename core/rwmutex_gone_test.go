package core_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keylock/keylock/core"
)

// Giving back one of two read leases of a read whose lease already ran out
// (no script had pruned it yet) must not bring the read back: it ends, the
// release is refused, and a writer gets in. Before, the release set the
// read's deadline a whole watchdog lease ahead, and writers waited for a
// read no Client knew of.
func TestRWReleaseDoesNotReviveAnEndedRead(t *testing.T) {
	_, rdb := single(t)
	c := newLocks(t, rdb)
	rw := c.RWMutex("ended-read")
	ctx := core.WithOwner(ctxTimeout(t, 30*time.Second), "o")
	one := mustLock(t, rw.RLocker(), ctx)
	mustLock(t, rw.RLocker(), ctx) // the same owner's second read lease
	bg := context.Background()
	// The read's lease runs out in Redis (as when its Client was cut off).
	past := float64(time.Now().Add(-time.Second).UnixMilli())
	if err := rdb.ZAdd(bg, "keylock:{ended-read}:readers", redis.Z{Score: past, Member: "o"}).Err(); err != nil {
		t.Fatal(err)
	}
	if err := one.Unlock(bg); !errors.Is(err, core.ErrNotHeld) {
		t.Fatalf("Unlock of a lease of an ended read: %v, want ErrNotHeld", err)
	}
	if err := rdb.ZScore(bg, "keylock:{ended-read}:readers", "o").Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("the ended read is still among the readers (%v)", err)
	}
	w, err := newLocks(t, rdb).RWMutex("ended-read").TryLock(bg)
	if err != nil {
		t.Fatalf("writer after the read ended: %v", err)
	}
	mustUnlock(t, w)
}

// A writer at the head of the line whose attempt is already over (it gave
// up, and its leave has not landed) does not stop a release from serving
// the waiters behind it: the reader behind it is granted its read by the
// release itself, not at its next look a second later.
func TestRWReleaseServesPastAWriterThatGaveUp(t *testing.T) {
	srv, rdb := single(t)
	ctx := ctxTimeout(t, 30*time.Second)
	bg := context.Background()
	holder := mustLock(t, newLocks(t, srv.NewClient(t)).RWMutex("past-over"), ctx)
	ghostInLine(t, rdb, "past-over", "w")
	if err := rdb.Set(bg, "keylock:{past-over}:rel:ghost", "-1", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	got := make(chan *core.Lease, 1)
	reader := newLocks(t, srv.NewClient(t)).RWMutex("past-over")
	go func() {
		l, err := reader.RLock(ctx)
		if err != nil {
			t.Errorf("reader: %v", err)
		}
		got <- l
	}()
	waitLineLen(t, rdb, "past-over", 2)
	mustUnlock(t, holder)
	if n := rdb.ZCard(bg, "keylock:{past-over}:readers").Val(); n != 1 {
		t.Fatalf("%d readers right after the release, want the reader behind the writer that gave up granted (line %v, standing %v, readers %v)", n,
			rdb.LRange(bg, "keylock:{past-over}:queue", 0, -1).Val(), rdb.HGetAll(bg, "keylock:{past-over}:standing").Val(),
			rdb.HGetAll(bg, "keylock:{past-over}:rcount").Val())
	}
	if rdb.Exists(bg, "keylock:{past-over}").Val() != 0 {
		t.Fatal("the writer that gave up was granted the lock")
	}
	select {
	case l := <-got:
		if l != nil {
			mustUnlock(t, l)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the reader behind the writer that gave up was not served")
	}
}
