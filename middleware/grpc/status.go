package grpclock

import (
	"context"
	"errors"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/keylock/keylock/adapter"
	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/keytmpl"
)

// ErrorInfo values in the details of the statuses the interceptors return.
const (
	// Domain is errdetails.ErrorInfo.Domain of every status grpclock returns.
	Domain = "keylock"
	// ReasonBusy: the key is locked by another call (Aborted), or all
	// permits of a semaphore are taken (ResourceExhausted). The status also
	// carries errdetails.RetryInfo.
	ReasonBusy = "LOCK_BUSY"
	// ReasonInvalidKey: a placeholder's value is missing, empty or too long
	// (InvalidArgument).
	ReasonInvalidKey = "LOCK_KEY_INVALID"
	// ReasonUnavailable: Redis could not be reached (Unavailable).
	ReasonUnavailable = "LOCK_UNAVAILABLE"
	// ReasonSourceFailed: a key source failed on the server's side
	// (Internal): a value that cannot be a key, not the caller's fault. No
	// source grpclock offers fails this way (a SourceFunc returns a value or
	// reports it missing, InvalidArgument); the reason is kept for sources
	// that may.
	ReasonSourceFailed = "LOCK_SOURCE_FAILED"
	// ReasonLockLost: the lock was lost (or the core.Client closed) while
	// the handler ran, and the handler gave up without an answer of its own
	// (Unavailable).
	ReasonLockLost = "LOCK_LOST"
)

// status turns an error from rendering or locking into the call's status.
// Messages name the template and placeholder, never the rendered key or a
// value (they may hold user ids), nor Redis addresses.
func (r *rule) status(err error) error {
	switch adapter.Classify(err) {
	case core.ClassInvalid:
		return r.invalid(err)
	case core.ClassDeadline:
		return status.Error(codes.DeadlineExceeded, "keylock: deadline exceeded while waiting for the lock "+r.quoted)
	case core.ClassCanceled:
		return status.Error(codes.Canceled, "keylock: call cancelled while waiting for the lock "+r.quoted)
	case core.ClassBusy:
		return r.busy(err)
	case core.ClassInternal:
		return withDetails(status.New(codes.Internal, "keylock: a key source failed for "+r.quoted), r.info(ReasonSourceFailed))
	}
	return withDetails(status.New(codes.Unavailable, "keylock: lock service unavailable for "+r.quoted), r.info(ReasonUnavailable))
}

// lost is the call's answer once the handler returned err under ctx: when
// ctx ended because the lock did (adapter.LockLost: lost, or the
// core.Client closed), a handler that gave up — an error that is not a
// status, or a Canceled or DeadlineExceeded status, which grpc-go makes of
// ctx.Err() — gets Unavailable LOCK_LOST; a reply or a status of the
// handler's own is kept.
func (r *rule) lost(ctx context.Context, err error) error {
	if st, ok := status.FromError(err); err == nil || adapter.LockLost(ctx) == nil || ok && st.Code() != codes.Canceled && st.Code() != codes.DeadlineExceeded {
		return err
	}
	return withDetails(status.New(codes.Unavailable, "keylock: lock "+r.quoted+" lost while the handler ran"), r.info(ReasonLockLost))
}

// busy is Aborted (ResourceExhausted for a semaphore) with RetryInfo set to
// adapter.RetryHint: the holder's remaining lease as Redis last reported it,
// capped at adapter.MaxRetryHint (1s).
func (r *rule) busy(err error) error {
	code, msg := codes.Aborted, "keylock: lock "+r.quoted+" is held by another call"
	if r.g.Semaphore() {
		code, msg = codes.ResourceExhausted, "keylock: all permits of "+r.quoted+" are taken"
	}
	return withDetails(status.New(code, msg),
		&errdetails.RetryInfo{RetryDelay: durationpb.New(adapter.RetryHint(err))},
		r.info(ReasonBusy))
}

// invalid is InvalidArgument naming the placeholder, with a BadRequest
// field violation when the placeholder is a request field.
func (r *rule) invalid(err error) error {
	st := status.New(codes.InvalidArgument, err.Error())
	ke, ok := errors.AsType[*keytmpl.KeyError](err)
	if !ok {
		return withDetails(st, r.info(ReasonInvalidKey))
	}
	info := r.info(ReasonInvalidKey)
	info.Metadata["placeholder"] = ke.Placeholder.String()
	if ke.Placeholder.Source != srcReq {
		return withDetails(st, info)
	}
	return withDetails(st, info, &errdetails.BadRequest{
		FieldViolations: []*errdetails.BadRequest_FieldViolation{{
			Field:       ke.Placeholder.Name,
			Description: ke.Reason,
		}},
	})
}

func (r *rule) info(reason string) *errdetails.ErrorInfo {
	return &errdetails.ErrorInfo{
		Reason:   reason,
		Domain:   Domain,
		Metadata: map[string]string{"template": r.g.Template().String()},
	}
}

// withDetails adds details to st; if they cannot be marshalled (they
// always can), st is returned without them.
func withDetails(st *status.Status, details ...protoadapt.MessageV1) error {
	if d, err := st.WithDetails(details...); err == nil {
		return d.Err()
	}
	return st.Err()
}
