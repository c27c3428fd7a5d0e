package grpclock_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/keylock/keylock/core"
	grpclock "github.com/keylock/keylock/middleware/grpc"
	"github.com/keylock/keylock/middleware/grpc/internal/testpb"
)

func streamOnly(i ...grpc.StreamServerInterceptor) []grpc.StreamServerInterceptor { return i }

// uploadSeen is what the Upload handler saw.
type uploadSeen struct {
	firstErr error  // the first Recv's error
	firstID  string // item.id of the first message
	received int
	owned    bool  // stream.Context() carries a lock owner
	relocked error // TryLock of the key under stream.Context()
	byOther  error // TryLock of the key by another owner
}

func TestStreamLocksOnFirstMessage(t *testing.T) {
	e := newEnv(t)
	const tpl = "upload:{req.item.id}"
	seen := make(chan uploadSeen, 1)
	s := &shop{upload: func(stream testpb.Shop_UploadServer) error {
		var v uploadSeen
		defer func() { seen <- v }()
		ctx := stream.Context() // taken before the first message, on purpose
		m, err := stream.Recv()
		v.firstErr = err
		if err != nil {
			return err
		}
		v.firstID, v.received = m.GetItem().GetId(), 1
		_, v.owned = core.OwnerFrom(ctx)
		if inner, err := e.locks.Mutex("upload:" + v.firstID).TryLock(ctx); err == nil {
			_ = inner.Unlock(context.Background())
		} else {
			v.relocked = err
		}
		_, v.byOther = e.locks.Mutex("upload:" + v.firstID).TryLock(context.Background())
		for {
			if _, err := stream.Recv(); err == io.EOF {
				break
			} else if err != nil {
				return err
			}
			v.received++
		}
		return stream.SendAndClose(&testpb.BuyReply{ItemId: v.firstID, Received: int64(v.received)})
	}}
	c := serve(t, s, nil, streamOnly(grpclock.StreamServerInterceptor(e.locks, grpclock.WithMethod(mUpload, tpl))))
	e.hold(t, "upload:busy")

	upload := func(t *testing.T, msgs ...*testpb.BuyRequest) (*testpb.BuyReply, error) {
		t.Helper()
		st, err := c.Upload(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			if err := st.Send(m); err != nil && err != io.EOF {
				t.Fatal(err)
			}
		}
		return st.CloseAndRecv()
	}

	t.Run("free key", func(t *testing.T) {
		r, err := upload(t,
			&testpb.BuyRequest{Item: &testpb.Item{Id: "y"}},
			&testpb.BuyRequest{Item: &testpb.Item{Id: "other"}},
			&testpb.BuyRequest{})
		if err != nil || r.ItemId != "y" || r.Received != 3 {
			t.Fatalf("Upload = %v, %v; want item y, 3 messages received", r, err)
		}
		v := <-seen
		if !v.owned || v.relocked != nil {
			t.Errorf("stream.Context() owned=%v, nested TryLock = %v; want an owner and re-entry", v.owned, v.relocked)
		}
		if !isLocked(v.byOther) {
			t.Errorf("TryLock of upload:y by another owner during the stream = %v, want ErrLocked", v.byOther)
		}
		if n, _ := e.rdb.Exists(context.Background(), "keylock:{upload:y}").Result(); n != 0 {
			t.Error("lock upload:y still exists after the stream, want released")
		}
	})

	t.Run("busy key", func(t *testing.T) {
		_, err := upload(t, &testpb.BuyRequest{Item: &testpb.Item{Id: "busy"}})
		d := wantCode(t, err, codes.Aborted)
		wantInfo(t, d, grpclock.ReasonBusy, tpl)
		if d.retry == nil {
			t.Error("no RetryInfo detail")
		}
		if v := <-seen; status.Code(v.firstErr) != codes.Aborted {
			t.Errorf("handler's first Recv = %v, want the Aborted status", v.firstErr)
		}
	})

	t.Run("no first message", func(t *testing.T) {
		_, err := upload(t)
		if d := wantCode(t, err, codes.InvalidArgument); !strings.Contains(d.st.Message(), "{req.item.id}") {
			t.Errorf("message %q, want it to name {req.item.id}", d.st.Message())
		}
		<-seen
	})

	t.Run("handler swallows the lock error", func(t *testing.T) {
		// A handler that ignores the first Recv's error still cannot answer:
		// the interceptor returns the lock's status.
		s.upload = func(stream testpb.Shop_UploadServer) error {
			_, _ = stream.Recv()
			err := stream.SendAndClose(&testpb.BuyReply{ItemId: "ignored"})
			seen <- uploadSeen{firstErr: err}
			return nil
		}
		_, err := upload(t, &testpb.BuyRequest{Item: &testpb.Item{Id: "busy"}})
		wantCode(t, err, codes.Aborted)
		if v := <-seen; status.Code(v.firstErr) != codes.Aborted {
			t.Errorf("SendAndClose after a failed lock = %v, want the Aborted status", v.firstErr)
		}
	})
}

func TestStreamLostLockCancelsContext(t *testing.T) {
	e := newEnv(t, core.WithWatchdogTimeout(300*time.Millisecond))
	entered, cause := make(chan struct{}), make(chan error, 1)
	s := &shop{upload: func(stream testpb.Shop_UploadServer) error {
		if _, err := stream.Recv(); err != nil {
			return err
		}
		close(entered)
		cause <- causeWhenDone(stream.Context())
		return stream.Context().Err()
	}}
	c := serve(t, s, nil, streamOnly(grpclock.StreamServerInterceptor(e.locks, grpclock.WithMethod(mUpload, "upload:{req.item_id}"))))

	st, err := c.Upload(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&testpb.BuyRequest{ItemId: "lost"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, entered, "the handler to take the lock")
	if n, err := e.rdb.Del(context.Background(), "keylock:{upload:lost}").Result(); err != nil || n != 1 {
		t.Fatalf("DEL keylock:{upload:lost} = %d, %v; want 1 key deleted", n, err)
	}
	if got := waitFor(t, cause, "the stream context to end"); !errors.Is(got, core.ErrLockLost) {
		t.Errorf("context.Cause(stream.Context()) = %v, want core.ErrLockLost", got)
	}
	_, err = st.CloseAndRecv()
	wantInfo(t, wantCode(t, err, codes.Unavailable), grpclock.ReasonLockLost, "upload:{req.item_id}")
}

// A stream locked before its handler starts answers a lost lock the same
// way: Unavailable LOCK_LOST for a handler that returns its context's
// error.
func TestStreamLockedBeforeHandlerLostLock(t *testing.T) {
	e := newEnv(t, core.WithWatchdogTimeout(300*time.Millisecond))
	const tpl = "watch:{md.x-user-id}"
	entered, cause := make(chan struct{}), make(chan error, 1)
	s := &shop{watch: func(_ *testpb.BuyRequest, stream testpb.Shop_WatchServer) error {
		close(entered)
		cause <- causeWhenDone(stream.Context())
		return stream.Context().Err()
	}}
	c := serve(t, s, nil, streamOnly(grpclock.StreamServerInterceptor(e.locks, grpclock.WithMethod(mWatch, tpl))))

	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-user-id", "u1")
	st, err := c.Watch(ctx, &testpb.BuyRequest{ItemId: "w"})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, entered, "the handler to start")
	if n, err := e.rdb.Del(context.Background(), "keylock:{watch:u1}").Result(); err != nil || n != 1 {
		t.Fatalf("DEL keylock:{watch:u1} = %d, %v; want 1 key deleted", n, err)
	}
	if got := waitFor(t, cause, "the stream context to end"); !errors.Is(got, core.ErrLockLost) {
		t.Errorf("context.Cause(stream.Context()) = %v, want core.ErrLockLost", got)
	}
	_, err = st.Recv()
	wantInfo(t, wantCode(t, err, codes.Unavailable), grpclock.ReasonLockLost, tpl)
}

// TestStreamLockedBeforeHandler covers a template without {req.*}: the lock
// is taken before the handler starts, and stream.Context() is the lease's.
func TestStreamLockedBeforeHandler(t *testing.T) {
	e := newEnv(t)
	const tpl = "watch:{md.x-user-id}"
	seen := make(chan error, 1)
	s := &shop{watch: func(req *testpb.BuyRequest, stream testpb.Shop_WatchServer) error {
		_, err := e.locks.Mutex("watch:u1").TryLock(context.Background())
		seen <- err
		return stream.Send(&testpb.BuyReply{ItemId: req.ItemId})
	}}
	c := serve(t, s, nil, streamOnly(grpclock.StreamServerInterceptor(e.locks, grpclock.WithMethod(mWatch, tpl))))

	watch := func(user string) (*testpb.BuyReply, error) {
		ctx := metadata.AppendToOutgoingContext(context.Background(), "x-user-id", user)
		st, err := c.Watch(ctx, &testpb.BuyRequest{ItemId: "w"})
		if err != nil {
			return nil, err
		}
		return st.Recv()
	}
	if r, err := watch("u1"); err != nil || r.ItemId != "w" {
		t.Fatalf("Watch(u1) = %v, %v; want a reply", r, err)
	}
	if err := <-seen; !isLocked(err) {
		t.Errorf("TryLock of watch:u1 by another owner while the handler ran = %v, want ErrLocked", err)
	}
	e.hold(t, "watch:u2")
	_, err := watch("u2")
	wantInfo(t, wantCode(t, err, codes.Aborted), grpclock.ReasonBusy, tpl)
}

func TestStreamMethodWithoutRuleIsUntouched(t *testing.T) {
	e := newDownEnv(t)
	owned := make(chan bool, 1)
	s := &shop{upload: func(stream testpb.Shop_UploadServer) error {
		_, ok := core.OwnerFrom(stream.Context())
		owned <- ok
		return stream.SendAndClose(&testpb.BuyReply{})
	}}
	c := serve(t, s, nil, streamOnly(grpclock.StreamServerInterceptor(e.locks, grpclock.WithMethod(mWatch, "watch:{req.item_id}"))))
	e.srv.Kill()
	st, err := c.Upload(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.CloseAndRecv(); err != nil {
		t.Fatalf("Upload (no rule) with Redis down = %v, want success", err)
	}
	if <-owned {
		t.Error("Upload handler saw a lock owner, want an untouched stream")
	}
}

// A stream locked on its first message: LeaseFrom(stream.Context()) finds
// the lease once that message is received (its token fences the work), and
// a handler that panics — recovered by an interceptor outside grpclock, the
// usual setup — still releases the lock.
func TestStreamOnFirstMessageLeaseFromAndPanic(t *testing.T) {
	e := newEnv(t)
	const tpl = "upload:{req.item.id}"
	type seenT struct {
		before, after bool
		token         uint64
	}
	seen := make(chan seenT, 1)
	s := &shop{upload: func(stream testpb.Shop_UploadServer) error {
		var v seenT
		_, v.before = grpclock.LeaseFrom(stream.Context())
		m, err := stream.Recv()
		if err != nil {
			seen <- v
			return err
		}
		if l, ok := grpclock.LeaseFrom(stream.Context()); ok {
			v.after, v.token = true, l.Token()
		}
		seen <- v
		if m.GetItem().GetId() == "panics" {
			panic("a bug in the handler")
		}
		return stream.SendAndClose(&testpb.BuyReply{ItemId: m.GetItem().GetId()})
	}}
	recoverer := func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = status.Errorf(codes.Internal, "panic: %v", r)
			}
		}()
		return h(srv, ss)
	}
	c := serve(t, s, nil, streamOnly(recoverer, grpclock.StreamServerInterceptor(e.locks, grpclock.WithMethod(mUpload, tpl))))
	upload := func(id string) error {
		st, err := c.Upload(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Send(&testpb.BuyRequest{Item: &testpb.Item{Id: id}}); err != nil && err != io.EOF {
			t.Fatal(err)
		}
		_, err = st.CloseAndRecv()
		return err
	}

	if err := upload("leased"); err != nil {
		t.Fatalf("Upload: %v", err)
	}
	if v := <-seen; v.before || !v.after || v.token == 0 {
		t.Errorf("LeaseFrom(stream.Context()) before the first message %v, after %v (token %d); want false, then the lease", v.before, v.after, v.token)
	}

	err := upload("panics")
	wantCode(t, err, codes.Internal)
	<-seen
	if n, _ := e.rdb.Exists(context.Background(), "keylock:{upload:panics}").Result(); n != 0 {
		t.Fatal("lock upload:panics still held after its handler panicked, want released")
	}
}
