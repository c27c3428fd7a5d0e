package contend

import (
	"context"
	_ "embed"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

//go:embed baresem_acquire.lua
var bareSemAcquireSrc string

// bareSemAcquire is KindBareSem's acquire script.
var bareSemAcquire = redis.NewScriptServerSHA(bareSemAcquireSrc)

// bareSem is KindBareSem: a ZSET of holders scored by lease deadline,
// taken by bareSemAcquire, retried every PollEvery while full, released by
// ZREM.
type bareSem struct {
	rdb     redis.Cmdable
	key     string
	owner   string
	permits int
	seq     atomic.Uint64
}

func (b *bareSem) lock(ctx context.Context) (held, error) {
	holder := b.owner + ":" + strconv.FormatUint(b.seq.Add(1), 10)
	return pollUntil(ctx, func() (held, bool, error) {
		now := time.Now().UnixMilli()
		ok, err := bareSemAcquire.Run(ctx, b.rdb, []string{b.key}, holder, b.permits, now, bareLease.Milliseconds()).Int()
		return bareSemHeld{b: b, holder: holder}, ok == 1, err
	})
}

// bareSemHeld is one slot of a bareSem.
type bareSemHeld struct {
	b      *bareSem
	holder string
}

// Unlock removes the holder; one that was not there (its lease ran out and
// another took the slot) is errBareNotHeld.
func (h bareSemHeld) Unlock(ctx context.Context) error {
	n, err := h.b.rdb.ZRem(ctx, h.b.key, h.holder).Result()
	if err != nil {
		return err
	}
	if n != 1 {
		return errBareNotHeld
	}
	return nil
}
