package keylocktest_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/keylocktest"
)

// chargeOnce is code under test: it charges while it holds the order's
// lock and stops as soon as the lock is lost.
func chargeOnce(ctx context.Context, locks *core.Client, order string, charge func(context.Context) error) error {
	lease, err := locks.Mutex("order:" + order).Lock(ctx)
	if err != nil {
		return err
	}
	defer lease.Unlock(context.Background())
	return charge(lease.Context())
}

// A test of what chargeOnce does when its lock is lost mid-way: the charge
// sees its context cancelled with core.ErrLockLost.
func Example() {
	f, err := keylocktest.Start() // in a test: f := keylocktest.New(t)
	if err != nil {
		panic(err)
	}
	defer f.Close()
	err = chargeOnce(context.Background(), f.Client(), "42", func(ctx context.Context) error {
		lease, _ := core.LeaseFrom(ctx)
		f.Lose(lease) // an operator force-unlocks the order's lock
		<-ctx.Done()
		return context.Cause(ctx)
	})
	fmt.Println(errors.Is(err, core.ErrLockLost))
	// Output: true
}
