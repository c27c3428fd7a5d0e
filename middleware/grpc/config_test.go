package grpclock_test

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/keylock/keylock/core"
	grpclock "github.com/keylock/keylock/middleware/grpc"
)

// TestBadConfigFailsAtStartup: New returns an error naming the problem, and
// the interceptor constructors panic with the same message. Nothing here
// talks to Redis.
func TestBadConfigFailsAtStartup(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	t.Cleanup(func() { _ = rdb.Close() })
	locks := core.New(rdb)
	t.Cleanup(func() { _ = locks.Close() })
	src := func(context.Context, any) (string, bool) { return "", false }

	for _, tc := range []struct {
		name string
		opts []grpclock.Option
		want string // substring of the error
	}{
		{"unclosed brace", []grpclock.Option{grpclock.WithMethod(mBuy, "buy:{req.item_id")}, `unclosed '{' at offset 4`},
		{"unknown source", []grpclock.Option{grpclock.WithMethod(mBuy, "buy:{header.x}")}, `placeholder {header.x}: unknown source "header"`},
		{"bare req", []grpclock.Option{grpclock.WithMethod(mBuy, "buy:{req}")}, `source "req": needs a name`},
		{"bare md", []grpclock.Option{grpclock.WithMethod(mBuy, "buy:{md}")}, `source "md": needs a name`},
		{"bad md key", []grpclock.Option{grpclock.WithMethod(mBuy, "buy:{md.x user}")}, `not a valid metadata key`},
		{"method with a name", []grpclock.Option{grpclock.WithMethod(mBuy, "buy:{method.x}")}, `source "method": takes no name`},
		{"no such field", []grpclock.Option{grpclock.WithMethod(mBuy, "buy:{req.itemid}")}, `message keylock.grpclock.test.v1.BuyRequest has no field "itemid"`},
		{"no such nested field", []grpclock.Option{grpclock.WithMethod(mBuy, "buy:{req.item.sku}")}, `message keylock.grpclock.test.v1.Item has no field "sku"`},
		{"json name", []grpclock.Option{grpclock.WithMethod(mBuy, "buy:{req.itemId}")}, `has no field "itemId"`},
		{"repeated field", []grpclock.Option{grpclock.WithMethod(mBuy, "buy:{req.tags}")}, `is repeated or a map`},
		{"map field", []grpclock.Option{grpclock.WithMethod(mBuy, "buy:{req.labels}")}, `is repeated or a map`},
		{"message field", []grpclock.Option{grpclock.WithMethod(mBuy, "buy:{req.item}")}, `is a message: name one of its fields`},
		{"field of a scalar", []grpclock.Option{grpclock.WithMethod(mBuy, "buy:{req.item_id.x}")}, `is not a message`},
		{"bad field name", []grpclock.Option{grpclock.WithMethod(mBuy, "buy:{req.item..id}")}, `"" is not a protobuf field name`},
		{"bad method name", []grpclock.Option{grpclock.WithMethod("Shop/Buy", "buy:{req.item_id}")}, `not a full method name`},
		{"two rules", []grpclock.Option{grpclock.WithMethod(mBuy, "a:{req.item_id}"), grpclock.WithMethod(mBuy, "b:{req.item_id}")}, `has two rules`},
		{"semaphore of 0", []grpclock.Option{grpclock.WithMethod(mBuy, "buy:{req.item_id}", grpclock.Semaphore(0))}, `positive permit count`},
		{"unknown kind", []grpclock.Option{grpclock.WithMethod(mBuy, "buy:{req.item_id}", grpclock.WithKind(core.Spec{Kind: core.KindRedLock}))}, `cannot be used as a Locker`},
		{"negative wait", []grpclock.Option{grpclock.WithMethod(mBuy, "buy:{req.item_id}", grpclock.WithWait(-1))}, `WithWait(-1ns) must not be negative`},
		{"negative lease", []grpclock.Option{grpclock.WithMethod(mBuy, "buy:{req.item_id}", grpclock.WithLeaseTime(-1))}, `WithLeaseTime(-1ns) must not be negative`},
		{"lease shorter than core's minimum", []grpclock.Option{grpclock.WithMethod(mBuy, "buy:{req.item_id}", grpclock.WithLeaseTime(30))}, `WithLeaseTime(30ns) is shorter than core.MinLeaseTime`},
		{"negative release timeout", []grpclock.Option{grpclock.WithReleaseTimeout(-1)}, `WithReleaseTimeout(-1ns) must not be negative`},
		{"negative release timeout in a rule", []grpclock.Option{grpclock.WithMethod(mBuy, "buy:{req.item_id}", grpclock.WithReleaseTimeout(-1))}, `WithReleaseTimeout(-1ns) must not be negative`},
		{"nested rule", []grpclock.Option{grpclock.WithMethod(mBuy, "buy:{req.item_id}", grpclock.WithMethod(mBuy, "x"))}, `cannot be nested`},
		{"typo in a registered service's method", []grpclock.Option{grpclock.WithMethod("/keylock.grpclock.test.v1.Shop/Buyy", "buy:{req.item_id}")}, `service keylock.grpclock.test.v1.Shop has no method "Buyy"`},
		{"typo in a service's name", []grpclock.Option{grpclock.WithMethod("/keylock.grpclock.test.v1.Shopp/Buy", "buy:{req.item_id}")},
			`service keylock.grpclock.test.v1.Shopp is not registered (did you mean keylock.grpclock.test.v1.Shop?)`},
		{"typo in a service's package", []grpclock.Option{grpclock.WithMethod("/keylock.grpclock.tset.v1.Shop/Buy", "buy:{req.item_id}")},
			`service keylock.grpclock.tset.v1.Shop is not registered: import its generated package`},
		// A template that reads no request field needs no request type,
		// but the typo leaves the real method unlocked all the same.
		{"typo in a service's name, metadata only", []grpclock.Option{grpclock.WithMethod("/keylock.grpclock.test.v1.Shopp/Buy", "buy:{md.x-user-id}:{method}")},
			`service keylock.grpclock.test.v1.Shopp is not registered`},
		{"unregistered service beside a registered one", []grpclock.Option{grpclock.WithMethod(mBuy, "buy:{req.item_id}"), grpclock.WithMethod("/unregistered.v1.Svc/Do", "do:{md.x}")},
			`method "/unregistered.v1.Svc/Do": service unregistered.v1.Svc is not registered`},
		{"read and write", []grpclock.Option{grpclock.WithMethod(mBuy, "buy:{req.item_id}", grpclock.Read(), grpclock.Write())}, `conflicts with WithKind(read): choose one lock kind`},
		{"semaphore and fair", []grpclock.Option{grpclock.WithMethod(mBuy, "buy:{req.item_id}", grpclock.Semaphore(2), grpclock.Fair())}, `WithKind(fair) conflicts with Semaphore(2)`},
		{"source shadows req", []grpclock.Option{grpclock.WithSource("req", src)}, `"req" is a built-in source`},
		{"source name", []grpclock.Option{grpclock.WithSource("Tenant", src)}, `not a valid placeholder name`},
		{"nil source", []grpclock.Option{grpclock.WithSource("tenant", nil)}, `nil function`},
		{"custom source with a name", []grpclock.Option{grpclock.WithSource("tenant", src), grpclock.WithMethod(mBuy, "t:{tenant.id}")}, `{tenant.id} is not registered with WithSource ({tenant} is)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := grpclock.New(locks, tc.opts...)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "grpclock: ") {
				t.Fatalf("New error = %v, want one starting with \"grpclock: \" and containing %q", err, tc.want)
			}
			for name, build := range map[string]func(){
				"UnaryServerInterceptor":  func() { grpclock.UnaryServerInterceptor(locks, tc.opts...) },
				"StreamServerInterceptor": func() { grpclock.StreamServerInterceptor(locks, tc.opts...) },
			} {
				if got, ok := panicOf(build).(error); !ok || got.Error() != err.Error() {
					t.Errorf("%s panicked with %#v, want New's error value %q", name, got, err.Error())
				}
			}
		})
	}

	// Nil options are ignored (never dereferenced).
	if _, err := grpclock.New(locks, nil, grpclock.WithMethod(mBuy, "buy:{req.item_id}", nil)); err != nil {
		t.Errorf("New with nil options: %v, want success", err)
	}
	if _, err := grpclock.New(nil); err == nil {
		t.Error("New(nil) succeeded, want an error")
	}
	// Without a WithMethod rule the interceptors would lock nothing: a
	// start-up error, as asynqlock's Middleware without a WithTask rule.
	if _, err := grpclock.New(locks, grpclock.Fair()); err == nil || !strings.Contains(err.Error(), "no WithMethod rule") {
		t.Errorf("New without a rule = %v, want the no-rule error", err)
	}
	// A service that is not registered (served through a proxy's
	// UnknownServiceHandler, or with another codec) takes an explicit
	// AllowUnregistered, for one rule or for all; its {req.*} fields are
	// looked up per call.
	for _, opts := range [][]grpclock.Option{
		{grpclock.WithMethod("/unregistered.v1.Svc/Do", "do:{req.anything.at.all}", grpclock.AllowUnregistered())},
		{grpclock.AllowUnregistered(), grpclock.WithMethod("/unregistered.v1.Svc/Do", "do:{md.x}"), grpclock.WithMethod(mBuy, "buy:{req.item_id}")},
	} {
		if _, err := grpclock.New(locks, opts...); err != nil {
			t.Errorf("rule on an unregistered method with AllowUnregistered: %v, want success", err)
		}
	}
	// AllowUnregistered does not switch the checks off for a registered
	// service.
	if _, err := grpclock.New(locks, grpclock.AllowUnregistered(), grpclock.WithMethod(mBuy, "buy:{req.itemid}")); err == nil {
		t.Error("AllowUnregistered with a wrong field of a registered method: success, want the start-up error")
	}
}

func panicOf(f func()) (v any) {
	defer func() { v = recover() }()
	f()
	return nil
}
