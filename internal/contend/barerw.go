package contend

import (
	"context"
	_ "embed"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

//go:embed barerw_acquire.lua
var bareRWAcquireSrc string

// bareRWAcquire is KindBareRW's acquire script.
var bareRWAcquire = redis.NewScriptServerSHA(bareRWAcquireSrc)

// bareRW is KindBareRW: readers in a ZSET scored by lease deadline, the
// writer in a key of its own, both taken by bareRWAcquire and retried every
// PollEvery while refused; a reader is released by ZREM, a writer by
// compareAndDelete.
type bareRW struct {
	rdb     redis.Cmdable
	readers string
	writer  string
	owner   string
	seq     atomic.Uint64
}

func (b *bareRW) lock(ctx context.Context) (held, error)  { return b.take(ctx, "w") }
func (b *bareRW) rlock(ctx context.Context) (held, error) { return b.take(ctx, "r") }

// take acquires the side mode names ("r" or "w").
func (b *bareRW) take(ctx context.Context, mode string) (held, error) {
	holder := b.owner + ":" + strconv.FormatUint(b.seq.Add(1), 10)
	return pollUntil(ctx, func() (held, bool, error) {
		now := time.Now().UnixMilli()
		ok, err := bareRWAcquire.Run(ctx, b.rdb, []string{b.readers, b.writer}, mode, holder, now, bareLease.Milliseconds()).Int()
		return bareRWHeld{b: b, write: mode == "w", holder: holder}, ok == 1, err
	})
}

// bareRWHeld is one read or write hold of a bareRW.
type bareRWHeld struct {
	b      *bareRW
	write  bool
	holder string
}

// Unlock removes the reader, or deletes the writer key if it still holds
// this holder; a hold that was not there (its lease ran out) is
// errBareNotHeld.
func (h bareRWHeld) Unlock(ctx context.Context) error {
	var n int64
	var err error
	if h.write {
		n, err = compareAndDelete.Run(ctx, h.b.rdb, []string{h.b.writer}, h.holder).Int64()
	} else {
		n, err = h.b.rdb.ZRem(ctx, h.b.readers, h.holder).Result()
	}
	if err != nil {
		return err
	}
	if n != 1 {
		return errBareNotHeld
	}
	return nil
}
