package grpclock_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/selector"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/keytmpl"
	grpclock "github.com/keylock/keylock/middleware/grpc"
	"github.com/keylock/keylock/middleware/grpc/internal/testpb"
)

func unaryOnly(i ...grpc.UnaryServerInterceptor) []grpc.UnaryServerInterceptor { return i }

func TestUnaryOneCallPerKeyAtATime(t *testing.T) {
	e := newEnv(t)
	var inside, maxInside, done atomic.Int32
	s := &shop{buy: func(ctx context.Context, req *testpb.BuyRequest) (*testpb.BuyReply, error) {
		n := inside.Add(1)
		for {
			m := maxInside.Load()
			if n <= m || maxInside.CompareAndSwap(m, n) {
				break
			}
		}
		time.Sleep(10 * time.Millisecond) // give overlapping calls a chance to show
		inside.Add(-1)
		done.Add(1)
		return &testpb.BuyReply{ItemId: req.ItemId}, nil
	}}
	c := serve(t, s, unaryOnly(grpclock.UnaryServerInterceptor(e.locks,
		grpclock.WithMethod(mBuy, "buy:{req.item_id}", grpclock.WithWait(20*time.Second)))), nil)

	const calls = 6
	errs := make(chan error, calls)
	var wg sync.WaitGroup
	for range calls {
		wg.Go(func() {
			_, err := c.Buy(context.Background(), &testpb.BuyRequest{ItemId: "same"})
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("call: %v, want success (each waits its turn)", err)
		}
	}
	if got := maxInside.Load(); got != 1 {
		t.Errorf("at most %d calls were inside the handler at once, want 1", got)
	}
	if got := done.Load(); got != calls {
		t.Errorf("%d calls ran the handler, want %d", got, calls)
	}
}

func TestUnaryDifferentKeysDoNotBlock(t *testing.T) {
	e := newEnv(t)
	entered, release := make(chan struct{}), make(chan struct{})
	var first atomic.Bool
	s := &shop{buy: func(ctx context.Context, req *testpb.BuyRequest) (*testpb.BuyReply, error) {
		if req.ItemId == "a" && first.CompareAndSwap(false, true) {
			close(entered)
			<-release
		}
		return &testpb.BuyReply{ItemId: req.ItemId}, nil
	}}
	c := serve(t, s, unaryOnly(grpclock.UnaryServerInterceptor(e.locks,
		grpclock.WithMethod(mBuy, "buy:{req.item_id}"))), nil)

	aDone := make(chan error, 1)
	go func() {
		_, err := c.Buy(context.Background(), &testpb.BuyRequest{ItemId: "a"})
		aDone <- err
	}()
	waitFor(t, entered, "the call on key a to enter its handler")

	// While a's handler holds its lock: b goes through, a second a does not.
	if r, err := c.Buy(context.Background(), &testpb.BuyRequest{ItemId: "b"}); err != nil || r.ItemId != "b" {
		t.Errorf("Buy(b) while a is held = %v, %v; want b, nil", r, err)
	}
	_, err := c.Buy(context.Background(), &testpb.BuyRequest{ItemId: "a"})
	wantCode(t, err, codes.Aborted)

	close(release)
	if err := waitFor(t, aDone, "the call on key a"); err != nil {
		t.Errorf("Buy(a) = %v, want success", err)
	}
	// Released: a is free again.
	if _, err := c.Buy(context.Background(), &testpb.BuyRequest{ItemId: "a"}); err != nil {
		t.Errorf("Buy(a) after the first returned = %v, want success (lock released)", err)
	}
}

func TestUnaryBusyIsAbortedWithRetryInfo(t *testing.T) {
	e := newEnv(t)
	const tpl = "buy:{req.item_id}:{md.x-user-id}"
	c := serve(t, &shop{}, unaryOnly(grpclock.UnaryServerInterceptor(e.locks, grpclock.WithMethod(mBuy, tpl))), nil)
	e.hold(t, "buy:i1:u7")

	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-user-id", "u7")
	_, err := c.Buy(ctx, &testpb.BuyRequest{ItemId: "i1"})
	d := wantCode(t, err, codes.Aborted)
	wantInfo(t, d, grpclock.ReasonBusy, tpl)
	if d.retry == nil {
		t.Fatal("no RetryInfo detail")
	}
	if delay := d.retry.RetryDelay.AsDuration(); delay <= 0 || delay > 20*time.Second {
		t.Errorf("RetryInfo.RetryDelay = %s, want the holder's remaining lease, in (0, 20s]", delay)
	}
	if msg := d.st.Message(); strings.Contains(msg, "i1") || strings.Contains(msg, "u7") {
		t.Errorf("message %q shows key values, want only the template", msg)
	}

	// Another user's key is free.
	ctx = metadata.AppendToOutgoingContext(context.Background(), "x-user-id", "u8")
	if _, err := c.Buy(ctx, &testpb.BuyRequest{ItemId: "i1"}); err != nil {
		t.Errorf("Buy for another user = %v, want success", err)
	}
}

func TestUnaryInvalidKey(t *testing.T) {
	e := newEnv(t)
	const tpl = "buy:{req.item_id}:{req.item.id}:{md.x-user-id}"
	c := serve(t, &shop{}, unaryOnly(grpclock.UnaryServerInterceptor(e.locks, grpclock.WithMethod(mBuy, tpl))), nil)
	withUser := metadata.AppendToOutgoingContext(context.Background(), "x-user-id", "u7")

	for _, tc := range []struct {
		name        string
		ctx         context.Context
		req         *testpb.BuyRequest
		placeholder string
		reason      string
		field       string // BadRequest field violation, "" for none
	}{
		{"empty field", withUser, &testpb.BuyRequest{Item: &testpb.Item{Id: "x"}}, "{req.item_id}", "empty", "item_id"},
		{"too long", withUser, &testpb.BuyRequest{ItemId: strings.Repeat("x", keytmpl.MaxValueLen+1), Item: &testpb.Item{Id: "x"}},
			"{req.item_id}", "too long", "item_id"},
		{"unset nested message", withUser, &testpb.BuyRequest{ItemId: "i1"}, "{req.item.id}", "missing", "item.id"},
		{"missing metadata", context.Background(), &testpb.BuyRequest{ItemId: "i1", Item: &testpb.Item{Id: "x"}}, "{md.x-user-id}", "missing", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Buy(tc.ctx, tc.req)
			d := wantCode(t, err, codes.InvalidArgument)
			wantInfo(t, d, grpclock.ReasonInvalidKey, tpl)
			if msg := d.st.Message(); !strings.Contains(msg, tc.placeholder) || !strings.Contains(msg, tc.reason) {
				t.Errorf("message %q, want it to name %s and say %q", msg, tc.placeholder, tc.reason)
			}
			if got := d.info.Metadata["placeholder"]; got != tc.placeholder {
				t.Errorf("ErrorInfo placeholder = %q, want %q", got, tc.placeholder)
			}
			switch {
			case tc.field == "" && d.bad != nil:
				t.Errorf("BadRequest %v, want none for a metadata placeholder", d.bad)
			case tc.field != "" && (d.bad == nil || len(d.bad.FieldViolations) != 1 || d.bad.FieldViolations[0].Field != tc.field):
				t.Errorf("BadRequest %v, want one field violation on %q", d.bad, tc.field)
			}
		})
	}
}

func TestUnaryRedisDown(t *testing.T) {
	e := newDownEnv(t)
	const tpl = "buy:{req.item_id}"
	var ranUnlocked atomic.Bool
	s := &shop{buy: func(ctx context.Context, req *testpb.BuyRequest) (*testpb.BuyReply, error) {
		_, owned := core.OwnerFrom(ctx)
		_, leased := grpclock.LeaseFrom(ctx)
		ranUnlocked.Store(!owned && !leased && errors.Is(grpclock.FailedOpen(ctx), core.ErrUnavailable))
		return &testpb.BuyReply{ItemId: req.ItemId}, nil
	}}
	closed := serve(t, s, unaryOnly(grpclock.UnaryServerInterceptor(e.locks, grpclock.WithMethod(mBuy, tpl))), nil)
	open := serve(t, s, unaryOnly(grpclock.UnaryServerInterceptor(e.locks, grpclock.WithMethod(mBuy, tpl, grpclock.WithFailOpen(true)))), nil)
	e.srv.Kill()

	_, err := closed.Buy(context.Background(), &testpb.BuyRequest{ItemId: "i1"})
	d := wantCode(t, err, codes.Unavailable)
	wantInfo(t, d, grpclock.ReasonUnavailable, tpl)
	if msg := d.st.Message(); strings.Contains(msg, e.srv.Addr()) || strings.Contains(msg, "i1") {
		t.Errorf("message %q shows the Redis address or the key, want neither", msg)
	}

	if _, err := open.Buy(context.Background(), &testpb.BuyRequest{ItemId: "i1"}); err != nil {
		t.Fatalf("fail-open Buy with Redis down = %v, want success", err)
	}
	if !ranUnlocked.Load() {
		t.Error("fail-open handler ran with a lock owner or lease in its context, or without FailedOpen's error; want it unlocked, told why")
	}
}

// TestUnaryDeadlineAndCancelWhileWaiting ends the server-side context of a
// waiting call with an interceptor in front of grpclock (as a server-side
// timeout would), so the status seen is the server's, not the client's own
// deadline.
func TestUnaryDeadlineAndCancelWhileWaiting(t *testing.T) {
	e := newEnv(t)
	shorten := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		switch {
		case len(md["x-test-deadline"]) > 0:
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, 100*time.Millisecond)
			defer cancel()
		case len(md["x-test-cancel"]) > 0:
			var cancel context.CancelFunc
			ctx, cancel = context.WithCancel(ctx)
			defer cancel()
			stop := time.AfterFunc(100*time.Millisecond, cancel)
			defer stop.Stop()
		}
		return handler(ctx, req)
	}
	c := serve(t, &shop{}, unaryOnly(shorten, grpclock.UnaryServerInterceptor(e.locks,
		grpclock.WithMethod(mBuy, "buy:{req.item_id}", grpclock.WithWait(time.Minute)))), nil)
	e.hold(t, "buy:i1")

	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-test-deadline", "1")
	_, err := c.Buy(ctx, &testpb.BuyRequest{ItemId: "i1"})
	if d := wantCode(t, err, codes.DeadlineExceeded); !strings.Contains(d.st.Message(), "keylock") {
		t.Errorf("message %q, want grpclock's (waiting for the lock)", d.st.Message())
	}

	ctx = metadata.AppendToOutgoingContext(context.Background(), "x-test-cancel", "1")
	_, err = c.Buy(ctx, &testpb.BuyRequest{ItemId: "i1"})
	if d := wantCode(t, err, codes.Canceled); !strings.Contains(d.st.Message(), "keylock") {
		t.Errorf("message %q, want grpclock's (waiting for the lock)", d.st.Message())
	}
}

func TestUnaryWaitTimeExpiresAsBusy(t *testing.T) {
	e := newEnv(t)
	c := serve(t, &shop{}, unaryOnly(grpclock.UnaryServerInterceptor(e.locks,
		grpclock.WithMethod(mBuy, "buy:{req.item_id}", grpclock.WithWait(50*time.Millisecond)))), nil)
	e.hold(t, "buy:i1")
	_, err := c.Buy(context.Background(), &testpb.BuyRequest{ItemId: "i1"})
	d := wantCode(t, err, codes.Aborted)
	if d.retry == nil {
		t.Error("no RetryInfo detail")
	}
}

func TestUnaryHandlerContext(t *testing.T) {
	e := newEnv(t)
	type seen struct {
		owned    bool
		relocked error  // TryLock of the call's own key under the handler's context
		byOther  error  // TryLock of the call's key by another owner
		token    uint64 // grpclock.LeaseFrom(ctx).Token(): the fencing token
	}
	got := make(chan seen, 1)
	s := &shop{buy: func(ctx context.Context, req *testpb.BuyRequest) (*testpb.BuyReply, error) {
		var v seen
		_, v.owned = core.OwnerFrom(ctx)
		if l, ok := grpclock.LeaseFrom(ctx); ok && l.Name() == "buy:"+req.ItemId {
			v.token = l.Token()
		}
		inner, err := e.locks.Mutex("buy:" + req.ItemId).TryLock(ctx)
		v.relocked = err
		if err == nil {
			_ = inner.Unlock(context.Background())
		}
		_, v.byOther = e.locks.Mutex("buy:" + req.ItemId).TryLock(context.Background())
		got <- v
		return &testpb.BuyReply{}, nil
	}}
	c := serve(t, s, unaryOnly(grpclock.UnaryServerInterceptor(e.locks, grpclock.WithMethod(mBuy, "buy:{req.item_id}"))), nil)
	if _, err := c.Buy(context.Background(), &testpb.BuyRequest{ItemId: "r"}); err != nil {
		t.Fatal(err)
	}
	v := <-got
	if !v.owned {
		t.Error("handler context carries no lock owner, want the lease's")
	}
	if v.token == 0 {
		t.Error("grpclock.LeaseFrom(handler ctx) gave no lease of the call's key, want it with its fencing token")
	}
	if v.relocked != nil {
		t.Errorf("nested TryLock of the same key under the handler's context = %v, want re-entry", v.relocked)
	}
	if !isLocked(v.byOther) {
		t.Errorf("TryLock of the key by another owner while the handler ran = %v, want ErrLocked", v.byOther)
	}
	if n, err := e.rdb.Exists(context.Background(), "keylock:{buy:r}").Result(); err != nil || n != 0 {
		t.Errorf("lock key after the call: exists=%d err=%v, want released", n, err)
	}
}

// A lost lock cancels the handler's context with cause core.ErrLockLost. A
// handler that then gives up (returns its context's error, or an error of
// no status) is answered Unavailable LOCK_LOST, not Canceled "context
// canceled"; a status of its own, or a reply, is kept.
func TestUnaryLostLockCancelsHandler(t *testing.T) {
	e := newEnv(t, core.WithWatchdogTimeout(300*time.Millisecond))
	const tpl = "buy:{req.item_id}"
	for _, tc := range []struct {
		name   string
		answer func(ctx context.Context) error // the handler's error once its context ended
		want   codes.Code
	}{
		{"returns ctx.Err()", func(ctx context.Context) error { return ctx.Err() }, codes.Unavailable},
		{"returns the cause", func(ctx context.Context) error { return context.Cause(ctx) }, codes.Unavailable},
		{"returns its own status", func(context.Context) error { return status.Error(codes.FailedPrecondition, "mine") }, codes.FailedPrecondition},
		{"replies", func(context.Context) error { return nil }, codes.OK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			entered, cause := make(chan struct{}), make(chan error, 1)
			s := &shop{buy: func(ctx context.Context, req *testpb.BuyRequest) (*testpb.BuyReply, error) {
				close(entered)
				cause <- causeWhenDone(ctx)
				if err := tc.answer(ctx); err != nil {
					return nil, err
				}
				return &testpb.BuyReply{ItemId: req.ItemId}, nil
			}}
			c := serve(t, s, unaryOnly(grpclock.UnaryServerInterceptor(e.locks, grpclock.WithMethod(mBuy, tpl))), nil)

			callDone := make(chan error, 1)
			go func() {
				_, err := c.Buy(context.Background(), &testpb.BuyRequest{ItemId: "lost"})
				callDone <- err
			}()
			waitFor(t, entered, "the handler to start")
			if n, err := e.rdb.Del(context.Background(), "keylock:{buy:lost}").Result(); err != nil || n != 1 {
				t.Fatalf("DEL keylock:{buy:lost} = %d, %v; want 1 key deleted", n, err)
			}
			if got := waitFor(t, cause, "the handler's context to end"); !errors.Is(got, core.ErrLockLost) {
				t.Errorf("context.Cause(handler ctx) = %v, want core.ErrLockLost", got)
			}
			err := waitFor(t, callDone, "the call")
			if tc.want == codes.OK {
				if err != nil {
					t.Errorf("call = %v, want the handler's reply", err)
				}
				return
			}
			d := wantCode(t, err, tc.want)
			if tc.want == codes.Unavailable {
				wantInfo(t, d, grpclock.ReasonLockLost, tpl)
			}
		})
	}
}

func TestUnaryMethodWithoutRuleIsUntouched(t *testing.T) {
	e := newDownEnv(t)
	owned := make(chan bool, 1)
	s := &shop{browse: func(ctx context.Context, req *testpb.BuyRequest) (*testpb.BuyReply, error) {
		_, ok := core.OwnerFrom(ctx)
		owned <- ok
		return &testpb.BuyReply{ItemId: req.ItemId}, nil
	}}
	c := serve(t, s, unaryOnly(grpclock.UnaryServerInterceptor(e.locks, grpclock.WithMethod(mBuy, "buy:{req.item_id}"))), nil)
	e.srv.Kill() // a call that touched Redis would fail now

	// Even a request that could not render a key goes through.
	r, err := c.Browse(context.Background(), &testpb.BuyRequest{})
	if err != nil {
		t.Fatalf("Browse (no rule) with Redis down = %v, want success", err)
	}
	if r.ItemId != "" || <-owned {
		t.Errorf("Browse handler saw a lock owner or a changed request, want neither")
	}
	_, err = c.Buy(context.Background(), &testpb.BuyRequest{ItemId: "i1"})
	wantCode(t, err, codes.Unavailable)
}

func TestUnaryCustomSourceAndMethod(t *testing.T) {
	e := newEnv(t)
	type tenantKey struct{}
	auth := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if v := metadata.ValueFromIncomingContext(ctx, "x-tenant"); len(v) > 0 {
			ctx = context.WithValue(ctx, tenantKey{}, v[0])
		}
		return handler(ctx, req)
	}
	const tpl = "t:{tenant}:{method}:{req.item_id}"
	c := serve(t, &shop{}, unaryOnly(auth, grpclock.UnaryServerInterceptor(e.locks,
		grpclock.WithSource("tenant", func(ctx context.Context, _ any) (string, bool) {
			v, ok := ctx.Value(tenantKey{}).(string)
			return v, ok
		}),
		grpclock.WithMethod(mBuy, tpl))), nil)
	e.hold(t, "t:acme:%2Fkeylock.grpclock.test.v1.Shop%2FBuy:i1")

	acme := metadata.AppendToOutgoingContext(context.Background(), "x-tenant", "acme")
	_, err := c.Buy(acme, &testpb.BuyRequest{ItemId: "i1"})
	wantCode(t, err, codes.Aborted)

	other := metadata.AppendToOutgoingContext(context.Background(), "x-tenant", "other")
	if _, err := c.Buy(other, &testpb.BuyRequest{ItemId: "i1"}); err != nil {
		t.Errorf("Buy for another tenant = %v, want success", err)
	}
	_, err = c.Buy(context.Background(), &testpb.BuyRequest{ItemId: "i1"})
	if d := wantCode(t, err, codes.InvalidArgument); !strings.Contains(d.st.Message(), "{tenant}") {
		t.Errorf("message %q, want it to name {tenant}", d.st.Message())
	}
}

// TestBesideSelector shows grpclock composed with go-grpc-middleware's
// selector: calls the matcher rejects skip the lock.
func TestBesideSelector(t *testing.T) {
	e := newEnv(t)
	lock := grpclock.UnaryServerInterceptor(e.locks, grpclock.WithMethod(mBuy, "buy:{req.item_id}"))
	notInternal := selector.MatchFunc(func(ctx context.Context, _ interceptors.CallMeta) bool {
		return len(metadata.ValueFromIncomingContext(ctx, "x-internal")) == 0
	})
	c := serve(t, &shop{}, unaryOnly(selector.UnaryServerInterceptor(lock, notInternal)), nil)
	e.hold(t, "buy:i1")

	_, err := c.Buy(context.Background(), &testpb.BuyRequest{ItemId: "i1"})
	wantCode(t, err, codes.Aborted)
	internal := metadata.AppendToOutgoingContext(context.Background(), "x-internal", "1")
	if _, err := c.Buy(internal, &testpb.BuyRequest{ItemId: "i1"}); err != nil {
		t.Errorf("Buy skipped by the selector = %v, want success (not locked)", err)
	}
}

func TestOtherLockKinds(t *testing.T) {
	e := newEnv(t)
	implemented := func(t *testing.T, spec core.Spec) {
		t.Helper()
		if _, err := e.locks.Locker(spec, "probe"); err != nil {
			t.Fatalf("core cannot build a %s lock: %v", spec.Kind, err)
		}
	}
	t.Run("semaphore full is ResourceExhausted", func(t *testing.T) {
		implemented(t, core.Spec{Kind: core.KindSemaphore, Permits: 2})
		const tpl = "sem:{req.item_id}"
		entered, release := make(chan struct{}, 2), make(chan struct{})
		s := &shop{buy: func(ctx context.Context, req *testpb.BuyRequest) (*testpb.BuyReply, error) {
			entered <- struct{}{}
			<-release
			return &testpb.BuyReply{}, nil
		}}
		c := serve(t, s, unaryOnly(grpclock.UnaryServerInterceptor(e.locks, grpclock.WithMethod(mBuy, tpl, grpclock.Semaphore(2)))), nil)
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() {
				if _, err := c.Buy(context.Background(), &testpb.BuyRequest{ItemId: "i1"}); err != nil {
					t.Errorf("call holding a permit = %v, want success", err)
				}
			})
		}
		waitFor(t, entered, "first permit holder")
		waitFor(t, entered, "second permit holder")
		_, err := c.Buy(context.Background(), &testpb.BuyRequest{ItemId: "i1"})
		close(release)
		wg.Wait()
		d := wantCode(t, err, codes.ResourceExhausted)
		wantInfo(t, d, grpclock.ReasonBusy, tpl)
		if d.retry == nil {
			t.Error("no RetryInfo detail")
		}
	})
	for _, k := range []struct {
		kind core.Kind
		opt  grpclock.Option
	}{{core.KindFair, grpclock.Fair()}, {core.KindWrite, grpclock.Write()}} {
		t.Run(string(k.kind)+" busy is Aborted", func(t *testing.T) {
			implemented(t, core.Spec{Kind: k.kind})
			entered, release := make(chan struct{}), make(chan struct{})
			s := &shop{buy: func(ctx context.Context, req *testpb.BuyRequest) (*testpb.BuyReply, error) {
				close(entered)
				<-release
				return &testpb.BuyReply{}, nil
			}}
			c := serve(t, s, unaryOnly(grpclock.UnaryServerInterceptor(e.locks, grpclock.WithMethod(mBuy, "k:{req.item_id}", k.opt))), nil)
			first := make(chan error, 1)
			go func() {
				_, err := c.Buy(context.Background(), &testpb.BuyRequest{ItemId: "i1"})
				first <- err
			}()
			waitFor(t, entered, "the first call")
			_, err := c.Buy(context.Background(), &testpb.BuyRequest{ItemId: "i1"})
			close(release)
			wantCode(t, err, codes.Aborted)
			if err := waitFor(t, first, "the first call"); err != nil {
				t.Errorf("first call = %v, want success", err)
			}
		})
	}
}

// causeWhenDone waits for ctx, a handler's, to end and returns why
// (context.Cause), or an error when it has not ended within 10s.
func causeWhenDone(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-time.After(10 * time.Second):
		return errors.New("handler context not cancelled within 10s")
	}
}
