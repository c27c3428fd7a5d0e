package idempotency

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/keylock/keylock/core"
)

// Keys. The lock of an idempotency key is core's lock hash of its name
// (core's documented layout, keylock:{<name>}); its record shares the
// hash tag, so the store script touches one Cluster slot:
//
//	keylock:{idempotency:<scope>:<key>}             the lock (core)
//	idempotency:response:{idempotency:<scope>:<key>} the record (string, TTL)
func lockKey(name string) string   { return "keylock:{" + name + "}" }
func recordKey(name string) string { return "idempotency:response:{" + name + "}" }

// errBadRecord reports a record that does not decode.
var errBadRecord = errors.New("keylock: idempotency: stored record does not decode")

// lookup returns the record of the lock name, nil when there is none. Its
// errors name neither the key nor the record: the request context's error
// (499, 504), errBadRecord (500), or one matching core.ErrUnavailable (503).
func (m *middleware) lookup(ctx context.Context, name string) (*record, error) {
	s, err := m.rdb.Get(ctx, recordKey(name)).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return nil, nil
	case err != nil && ctx.Err() != nil:
		return nil, ctx.Err()
	case err != nil:
		return nil, fmt.Errorf("%w: idempotency: look-up: %w", core.ErrUnavailable, err)
	}
	rec, err := decodeRecord(s)
	if err != nil {
		return nil, errBadRecord
	}
	return rec, nil
}
