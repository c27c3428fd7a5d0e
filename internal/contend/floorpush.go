package contend

import (
	"context"
	"errors"
	"strconv"
	"strings"
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

// KindFloorPushGuarantees is the push-handoff floor with the fewest
// commands the core locks' guarantees need: a fencing token (the server's
// clock and the counter), the attempt's record (SET NX … GET, which also
// finds a copy of the attempt), which a grant turns into "won, with this
// token" so that a lost push can be answered, an idempotent release (its
// receipt, SET … GET) and a deadline for each waiter's place (in its
// entry; a waiter past it is skipped). Still no re-entry (the hold is a
// string), no renewal of places, no claim window and no notice to the
// next waiter: what a handoff costs in Redis once it is safe to retry.
const KindFloorPushGuarantees Kind = "floor-push-guarantees"

var (
	floorPushGAcquire = redis.NewScript(`
local t = redis.call('time')
local token = t[1] .. string.format('%06d', tonumber(t[2]))
local won = redis.call('set', KEYS[1], ARGV[1], 'nx', 'px', ARGV[3])
local r = redis.call('set', KEYS[4], won and ('A' .. token) or 'W', 'nx', 'px', ARGV[4], 'get')
if r then
  return string.sub(r, 1, 1) == 'A' and 1 or 0
end
if won then
  redis.call('set', KEYS[3], token, 'px', '3600000', 'get')
  return 1
end
local dl = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + tonumber(ARGV[5])
redis.call('rpush', KEYS[2], ARGV[1] .. ' ' .. ARGV[2] .. ' ' .. string.format('%d', dl))
return 0`)
	floorPushGRelease = redis.NewScript(`
local r = redis.call('set', KEYS[4], '0', 'px', ARGV[3], 'get')
if r then
  return 1
end
if redis.call('get', KEYS[1]) ~= ARGV[1] then
  return 0
end
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
while true do
  local first = redis.call('lpop', KEYS[2])
  if not first then
    redis.call('del', KEYS[1])
    return 1
  end
  local id, ch, dl = string.match(first, '^(%S+) (%S+) (%d+)$')
  if tonumber(dl) > now then
    local token = t[1] .. string.format('%06d', tonumber(t[2]))
    redis.call('set', KEYS[3], token, 'px', '3600000', 'get')
    redis.call('set', KEYS[5] .. id, 'A' .. token, 'px', ARGV[3])
    redis.call('set', KEYS[1], id, 'px', ARGV[2])
    redis.call('publish', ch, id .. ' ' .. token)
    return 2
  end
end`)
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
	guarantees     bool // KindFloorPushGuarantees
	seq            atomic.Uint64
	ps             *redis.PubSub

	mu      sync.Mutex
	waiting map[string]chan struct{} // by acquisition id, while in line

	done      chan struct{}
	closeOnce sync.Once
}

func newFloorPush(rdb redis.Cmdable, key, owner string, guarantees bool) (*floorPush, error) {
	sub, ok := rdb.(interface {
		Subscribe(ctx context.Context, channels ...string) *redis.PubSub
	})
	if !ok {
		return nil, errFloorPushNeedsSubscribe
	}
	f := &floorPush{
		rdb: rdb, key: key, queue: key + ":line", ch: key + ":grant:" + owner, owner: owner,
		leaseArg: bareLeaseArg, guarantees: guarantees, waiting: make(map[string]chan struct{}),
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
		id, _, _ := strings.Cut(msg.Payload, " ") // the floor with guarantees sends "id token"
		f.mu.Lock()
		if w := f.waiting[id]; w != nil {
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
	var n int
	var err error
	if f.guarantees {
		n, err = floorPushGAcquire.Run(ctx, f.rdb, []string{f.key, f.queue, f.key + ":fence", f.key + ":rec:" + id},
			id, f.ch, f.leaseArg, floorRecordTTL, floorPlaceTTL).Int()
	} else {
		n, err = floorPushAcquire.Run(ctx, f.rdb, []string{f.key, f.queue}, id, f.ch, f.leaseArg).Int()
	}
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

// The floor with guarantees keeps attempt records and receipts 30 s, and a
// waiter's place 60 s (it is never renewed).
const (
	floorRecordTTL = "30000"
	floorPlaceTTL  = "60000"
)

// floorPushHeld is one acquisition of a floorPush.
type floorPushHeld struct {
	f  *floorPush
	id string
}

func (h floorPushHeld) Unlock(ctx context.Context) error {
	f := h.f
	var n int
	var err error
	if f.guarantees {
		n, err = floorPushGRelease.Run(ctx, f.rdb, []string{f.key, f.queue, f.key + ":fence", f.key + ":rel:" + h.id, f.key + ":rec:"},
			h.id, f.leaseArg, floorRecordTTL).Int()
	} else {
		n, err = floorPushRelease.Run(ctx, f.rdb, []string{f.key, f.queue}, h.id, f.leaseArg).Int()
	}
	if err == nil && n == 0 {
		err = errBareNotHeld
	}
	return err
}
