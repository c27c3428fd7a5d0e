package core

import (
	"context"
	"fmt"
	"strings"
)

// MaxOwnerLen is the longest owner id accepted, in bytes.
const MaxOwnerLen = 256

type ownerKey struct{}

// WithOwner returns a context whose locks are taken for owner id: every
// acquisition under it with the same id re-enters locks that id holds,
// whichever goroutine, Client or process makes it. Use it to give a unit of
// work (a job attempt, a session) one identity. The id must be non-empty,
// at most MaxOwnerLen bytes and must not start with ':' (reserved);
// otherwise acquisitions fail with ErrInvalidOption.
//
// Lease.Context already carries the owner of its lock; WithOwner is for
// choosing one yourself.
func WithOwner(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, ownerKey{}, id)
}

// OwnerFrom returns the owner id carried by ctx, if any.
func OwnerFrom(ctx context.Context) (string, bool) {
	id, ok := ctx.Value(ownerKey{}).(string)
	return id, ok
}

func validateOwner(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("%w: empty owner id", ErrInvalidOption)
	case len(id) > MaxOwnerLen:
		return fmt.Errorf("%w: owner id of %d bytes, max %d", ErrInvalidOption, len(id), MaxOwnerLen)
	case strings.HasPrefix(id, ":"):
		return fmt.Errorf("%w: owner id %q starts with ':' (reserved)", ErrInvalidOption, id)
	}
	return nil
}
