package adapter

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"sync/atomic"

	"github.com/keylock/keylock/core"
)

// Owners per attempt: a job retried after its lock's lease expired (asynq
// gave up on the attempt) may still be running, so each attempt needs an
// owner of its own, never the job id alone.

var (
	attemptPrefix = func() string {
		var b [8]byte
		_, _ = rand.Read(b[:]) // never fails (crypto/rand panics instead)
		return hex.EncodeToString(b[:])
	}()
	attemptSeq atomic.Uint64
)

// maxAttemptID bounds the id part of an attempt owner.
const maxAttemptID = 128

// attemptKey marks a context whose owner WithAttempt chose.
type attemptKey struct{}

// WithAttempt returns ctx carrying a fresh owner for one attempt of a job
// or one stream, "<what>:<id>:<process-unique suffix>" (id cut to 128
// bytes), replacing any owner ctx had — unless an outer WithAttempt already
// chose the owner of ctx, which nested layers then share (and re-enter
// rather than block each other).
func WithAttempt(ctx context.Context, what, id string) context.Context {
	if ctx.Value(attemptKey{}) != nil {
		if _, ok := core.OwnerFrom(ctx); ok {
			return ctx
		}
	}
	if len(id) > maxAttemptID {
		id = id[:maxAttemptID]
	}
	owner := what + ":" + id + ":" + attemptPrefix + "-" + strconv.FormatUint(attemptSeq.Add(1), 36)
	return context.WithValue(core.WithOwner(ctx, owner), attemptKey{}, struct{}{})
}
