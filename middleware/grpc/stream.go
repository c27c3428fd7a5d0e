package grpclock

import (
	"context"
	"io"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"

	"github.com/keylock/keylock/adapter"
	"github.com/keylock/keylock/core"
)

// leasedStream is a stream whose lock was taken before the handler started:
// its context is the lease's (or, failing open, records why it runs
// unlocked).
type leasedStream struct {
	grpc.ServerStream
	ctx context.Context // the lease's context (grpc's wrapped-stream idiom)
}

func (s *leasedStream) Context() context.Context { return s.ctx }

// firstMsgStream takes the lock of a stream on its first message: the
// handler's first RecvMsg receives the message, renders the key from it and
// locks before returning.
type firstMsgStream struct {
	grpc.ServerStream
	r      *rule
	method string

	// ctx is what the handler gets from Context() from the start: the
	// stream's context plus the owner the lock is taken for. The lock is
	// taken under it, and it is cancelled with the lease's cause when the
	// lease's context ends (a lost lock: core.ErrLockLost).
	ctx    context.Context
	cancel context.CancelCauseFunc

	received atomic.Bool // the first RecvMsg has returned a message or io.EOF

	mu    sync.Mutex
	done  bool        // the handler has returned
	lease *core.Lease // held from the first message until finish
	stop  func() bool // stops propagating the lease's end to ctx
	err   error       // status of a failed lock: every later call returns it
}

func newFirstMsgStream(ss grpc.ServerStream, r *rule, method string) *firstMsgStream {
	ctx := ss.Context()
	if _, ok := core.OwnerFrom(ctx); !ok {
		ctx = adapter.WithAttempt(ctx, "grpclock", "stream")
	}
	ctx, cancel := context.WithCancelCause(ctx)
	s := &firstMsgStream{ServerStream: ss, r: r, method: method, cancel: cancel}
	s.ctx = context.WithValue(ctx, firstMsgKey{}, s) // LeaseFrom finds the lease
	return s
}

// firstMsgKey keys a firstMsgStream in its own context.
type firstMsgKey struct{}

// held returns the stream's lease while it holds one.
func (s *firstMsgStream) held() (*core.Lease, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lease, s.lease != nil
}

func (s *firstMsgStream) Context() context.Context { return s.ctx }

func (s *firstMsgStream) RecvMsg(m any) error {
	if s.received.Load() {
		if err := s.failed(); err != nil {
			return err
		}
		return s.ServerStream.RecvMsg(m)
	}
	err := s.ServerStream.RecvMsg(m)
	if err != nil && err != io.EOF {
		return err // the stream broke before its first message
	}
	s.received.Store(true)
	c := &call{ctx: s.ctx, method: s.method, req: m}
	if err == io.EOF {
		c.req = nil // no first message: {req.*} placeholders are missing
	}
	_, lease, lerr := s.r.g.Enter(s.ctx, c) // failing open: no lease, and not recorded

	s.mu.Lock()
	if s.done { // the handler returned while this RecvMsg was locking
		s.mu.Unlock()
		_ = s.r.g.Release(s.ctx, lease) // not under s.mu: a round trip
		return context.Canceled
	}
	defer s.mu.Unlock()
	if lerr != nil {
		s.err = s.r.status(lerr)
		return s.err
	}
	if lease != nil {
		lctx := lease.Context()
		s.lease = lease
		s.stop = context.AfterFunc(lctx, func() { s.cancel(context.Cause(lctx)) })
	}
	return err // nil, or io.EOF from a stream without messages
}

func (s *firstMsgStream) SendMsg(m any) error {
	if err := s.failed(); err != nil {
		return err
	}
	return s.ServerStream.SendMsg(m)
}

func (s *firstMsgStream) failed() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// finish runs when the handler has returned: it releases the lock and
// returns the status of a failed lock, if any, which the interceptor
// returns in place of the handler's error.
func (s *firstMsgStream) finish() error {
	s.mu.Lock()
	s.done = true
	lease, stop, err := s.lease, s.stop, s.err
	s.lease, s.stop = nil, nil
	s.mu.Unlock()
	if stop != nil {
		stop()
	}
	_ = s.r.g.Release(s.ctx, lease)
	s.cancel(context.Canceled)
	return err
}
