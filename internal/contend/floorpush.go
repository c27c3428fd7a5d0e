package contend

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// KindFloorPush is the floor of the contended runs: a FIFO lock that hands
// off by push, the way Mutex and FairMutex do under contention, with
// nothing else. Waiters line up in a Redis list; the release gives the
// lock to the first of them and publishes the grant on the channel its
// process subscribed to once; the waiter's Lock returns on the message,
// with no round trip after it. It has none of the guarantees: no fencing
// token, no idempotent attempt or release, no re-entry, no renewal, no
// line deadline, no claim window — a waiter that is gone keeps the lock
// for a whole lease. Not a lock to use: the fastest a push handoff can be
// on the machine, measured beside the poll loop.
const KindFloorPush Kind = "floor-push"

var (
	floorPushAcquire = redis.NewScript(`
if redis.call('set', KEYS[1], ARGV[1], 'nx', 'px', ARGV[3]) then
  return 1
end
redis.call('rpush', KEYS[2], ARGV[1] .. ' ' .. ARGV[2])
return 0`)
	floorPushRelease = redis.NewScript(`
if redis.call('get', KEYS[1]) ~= ARGV[1] then
  return 0
end
local first = redis.call('lpop', KEYS[2])
if not first then
  redis.call('del', KEYS[1])
  return 1
end
local id, ch = string.match(first, '^(%S+) (%S+)$')
redis.call('set', KEYS[1], id, 'px', ARGV[2])
redis.call('publish', ch, id)
return 2`)
)

var errFloorPushNeedsSubscribe = errors.New("contend: floor-push needs a go-redis client that subscribes")

// floorPush is a KindFloorPush lock on one key as one process sees it: one
// subscription to the process's channel for as long as the lock is open,
// read by one goroutine, which hands each grant to the Lock waiting for it.
type floorPush struct {
	rdb            redis.Cmdable
	key, queue, ch string
	owner          string
	leaseArg       string
	seq            atomic.Uint64
	ps             *redis.PubSub

	mu      sync.Mutex
	waiting map[string]chan struct{} // by acquisition id, while in line

	done      chan struct{}
	closeOnce sync.Once
}

func newFloorPush(rdb redis.Cmdable, key, owner string) (*floorPush, error) {
	sub, ok := rdb.(interface {
		Subscribe(ctx context.Context, channels ...string) *redis.PubSub
	})
	if !ok {
		return nil, errFloorPushNeedsSubscribe
	}
	f := &floorPush{
		rdb: rdb, key: key, queue: key + ":line", ch: key + ":grant:" + owner, owner: owner,
		leaseArg: bareLeaseArg, waiting: make(map[string]chan struct{}),
		done: make(chan struct{}),
	}
	f.ps = sub.Subscribe(context.Background(), f.ch)
	if _, err := f.ps.Receive(context.Background()); err != nil { // the subscription's confirmation
		_ = f.ps.Close()
		return nil, err
	}
	go f.read()
	return f, nil
}

// read hands every grant to the waiting Lock until Close.
func (f *floorPush) read() {
	defer close(f.done)
	for {
		msg, err := f.ps.ReceiveMessage(context.Background())
		if errors.Is(err, redis.ErrClosed) {
			return
		}
		if err != nil { // go-redis dials again at the next receive
			time.Sleep(10 * time.Millisecond)
			continue
		}
		f.mu.Lock()
		if w := f.waiting[msg.Payload]; w != nil {
			select {
			case w <- struct{}{}:
			default: // granted already
			}
		}
		f.mu.Unlock()
	}
}

// Close ends the subscription and waits for its reader.
func (f *floorPush) Close() error {
	f.closeOnce.Do(func() {
		_ = f.ps.Close()
		<-f.done
	})
	return nil
}

func (f *floorPush) lock(ctx context.Context) (held, error) {
	id := f.owner + ":" + strconv.FormatUint(f.seq.Add(1), 10)
	granted := make(chan struct{}, 1)
	f.mu.Lock()
	f.waiting[id] = granted
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		delete(f.waiting, id)
		f.mu.Unlock()
	}()
	n, err := floorPushAcquire.Run(ctx, f.rdb, []string{f.key, f.queue}, id, f.ch, f.leaseArg).Int()
	if err != nil {
		return nil, err
	}
	if n == 0 {
		if note, ok := ctx.Value(noteKey{}).(*waitNote); ok {
			note.waited() // in line: what a core lock's Wait event tells the runs
		}
		select {
		case <-granted:
		case <-ctx.Done():
			return nil, ctx.Err() // its place stays in line: a floor, not a lock
		}
	}
	return floorPushHeld{f: f, id: id}, nil
}

// floorPushHeld is one acquisition of a floorPush.
type floorPushHeld struct {
	f  *floorPush
	id string
}

func (h floorPushHeld) Unlock(ctx context.Context) error {
	f := h.f
	n, err := floorPushRelease.Run(ctx, f.rdb, []string{f.key, f.queue}, h.id, f.leaseArg).Int()
	if err == nil && n == 0 {
		err = errBareNotHeld
	}
	return err
}
