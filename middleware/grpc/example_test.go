package grpclock_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/selector"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"

	"github.com/keylock/keylock/core"
	grpclock "github.com/keylock/keylock/middleware/grpc"
)

// One Buy call per item and user at a time: a second one waits up to 200ms,
// then fails with Aborted and a RetryInfo.
func Example() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	locks := core.New(rdb)
	defer locks.Close()

	srv := grpc.NewServer(
		grpc.ChainUnaryInterceptor(grpclock.UnaryServerInterceptor(locks,
			grpclock.WithMethod("/shop.v1.Shop/Buy", "buy:{req.item_id}:{md.x-user-id}",
				grpclock.WithWait(200*time.Millisecond)),
		)),
	)
	// shoppb.RegisterShopServer(srv, &shop{}) ; srv.Serve(lis)
	_ = srv
}

// New builds the unary and stream interceptors from one configuration, and
// returns start-up errors instead of panicking.
func ExampleNew() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	locks := core.New(rdb)
	defer locks.Close()

	type tenantKey struct{} // set by an auth interceptor earlier in the chain
	li, err := grpclock.New(locks,
		grpclock.WithSource("tenant", func(ctx context.Context, _ any) (string, bool) {
			t, ok := ctx.Value(tenantKey{}).(string)
			return t, ok
		}),
		// Unary: the item of the request, per tenant.
		grpclock.WithMethod("/shop.v1.Shop/Buy", "buy:{tenant}:{req.item_id}",
			grpclock.WithWait(time.Second)),
		// Client stream: locked on the batch id of its first message, for at
		// most a minute (no renewal).
		grpclock.WithMethod("/shop.v1.Shop/Import", "import:{req.batch.id}",
			grpclock.WithLeaseTime(time.Minute)),
		// Metadata only: one report per tenant header; runs unlocked if Redis
		// is down.
		grpclock.WithMethod("/shop.v1.Shop/Report", "report:{md.x-tenant}",
			grpclock.WithFailOpen(true)),
	)
	if err != nil {
		log.Fatal(err) // e.g. a typo in a template
	}
	srv := grpc.NewServer(
		grpc.ChainUnaryInterceptor(li.Unary()),
		grpc.ChainStreamInterceptor(li.Stream()),
	)
	_ = srv
}

// A bad template, or a typo in a method's name, is reported when the
// interceptors are built, naming the method and the offending part. (The
// health service is registered by importing its generated package, as
// yours is by importing its own.)
func ExampleNew_startupError() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"}) // not dialled
	defer rdb.Close()
	locks := core.New(rdb)
	defer locks.Close()

	_, err := grpclock.New(locks,
		grpclock.WithMethod(healthpb.Health_Check_FullMethodName, "check:{req.service}:{header.x-user-id}"))
	fmt.Println(err)
	_, err = grpclock.New(locks,
		grpclock.WithMethod("/grpc.health.v1.Helth/Check", "check:{req.service}"))
	fmt.Println(err)
	// Output:
	// grpclock: method "/grpc.health.v1.Health/Check": keylock: template "check:{req.service}:{header.x-user-id}": placeholder {header.x-user-id}: unknown source "header" (known: md, method, req; add others with WithSource)
	// grpclock: method "/grpc.health.v1.Helth/Check": service grpc.health.v1.Helth is not registered (did you mean grpc.health.v1.Health?): import its generated package, or give the rule AllowUnregistered() if it is served without one
}

// grpclock selects methods itself; go-grpc-middleware's selector can switch
// it off by other criteria, here for calls from internal jobs.
func Example_selector() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	locks := core.New(rdb)
	defer locks.Close()

	lock := grpclock.UnaryServerInterceptor(locks,
		grpclock.WithMethod("/shop.v1.Shop/Buy", "buy:{req.item_id}"))
	notInternal := selector.MatchFunc(func(ctx context.Context, _ interceptors.CallMeta) bool {
		return len(metadata.ValueFromIncomingContext(ctx, "x-internal-job")) == 0
	})
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(
		selector.UnaryServerInterceptor(lock, notInternal),
	))
	_ = srv
}
