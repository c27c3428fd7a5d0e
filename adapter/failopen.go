package adapter

import "context"

// failedOpenKey marks a context whose handler runs without its lock.
type failedOpenKey struct{}

// WithFailedOpen returns ctx recording that the handler it is given to
// runs without its lock because of err (the policy failed open: Redis was
// unreachable). Adapters hand it to the handler; FailedOpen reads it.
func WithFailedOpen(ctx context.Context, err error) context.Context {
	return context.WithValue(ctx, failedOpenKey{}, err)
}

// FailedOpen returns the error for which the handler running under ctx was
// started without its lock (see WithFailedOpen), or nil.
func FailedOpen(ctx context.Context) error {
	err, _ := ctx.Value(failedOpenKey{}).(error)
	return err
}
