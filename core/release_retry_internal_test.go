package core

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/keylock/keylock/internal/redistest"
)

// Releases that keep failing (a RedLock release with a node down) do not
// hold up the others in the retry queue: a round ends after a batch that
// failed whole, and the failed go to the back.
func TestRetryQueueFailingReleasesDoNotBlockOthers(t *testing.T) {
	srv := redistest.NewServer(t)
	c := New(srv.NewClient(t))
	defer c.Close()
	until := time.Now().Add(time.Minute)
	down := errors.New("a node is down")
	for i := range 3 * retryParallel {
		c.retryRelease(retryItem{key: fmt.Sprint("failing-", i), until: until,
			send: func(context.Context) error { return down }})
	}
	landed := make(chan time.Time, 1)
	queued := time.Now()
	c.retryRelease(retryItem{key: "good", until: until, send: func(context.Context) error {
		select {
		case landed <- time.Now():
		default:
		}
		return nil
	}})
	select {
	case at := <-landed:
		t.Logf("the good release landed %s after it was queued", at.Sub(queued).Round(time.Millisecond))
	case <-time.After(5 * time.Second):
		t.Fatal("a release behind ones that keep failing was not sent within 5s")
	}
}
