package hub

import (
	"context"
	"errors"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Which pub/sub the hub uses: plain everywhere, sharded on a Redis ≥ 7
// Cluster.
const (
	pubUnknown int32 = iota
	pubPlain
	pubSharded
)

// modeProbe is one run of the sharded pub/sub probe; done closes when err is
// set.
type modeProbe struct {
	done chan struct{}
	err  error
}

// Sharded reports whether this Client uses sharded pub/sub: only on a
// *redis.ClusterClient whose servers know SPUBLISH. The answer is probed
// once (an SPUBLISH to a channel nobody listens on) and kept; a probe that
// fails for another reason than an unknown command is retried next time.
// The probe runs on a hub goroutine: sharded waits for it no longer than ctx
// lasts.
func (h *Hub) Sharded(ctx context.Context) (bool, error) {
	for {
		switch h.mode.Load() {
		case pubPlain:
			return false, nil
		case pubSharded:
			return true, nil
		}
		cc, ok := h.rdb.(*redis.ClusterClient)
		if !ok {
			h.mode.Store(pubPlain)
			return false, nil
		}
		h.mu.Lock()
		if h.closed {
			h.mu.Unlock()
			return false, h.errClosed
		}
		p := h.probe
		if p == nil {
			p = &modeProbe{done: make(chan struct{})}
			h.probe = p
			h.wg.Add(1)
			go h.probeMode(cc, p)
		}
		h.mu.Unlock()
		select {
		case <-p.done:
			if p.err != nil {
				return false, p.err
			}
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
}

// probeMode runs one probe and publishes its outcome in p.
func (h *Hub) probeMode(cc *redis.ClusterClient, p *modeProbe) {
	defer h.wg.Done()
	err := cc.SPublish(h.life, h.prefix+"probe}:ch", "0").Err()
	var rerr redis.Error
	switch {
	case err == nil:
		h.mode.Store(pubSharded)
	case errors.As(err, &rerr) && isUnknownCommand(err):
		h.mode.Store(pubPlain)
		err = nil
	}
	h.mu.Lock()
	p.err = err
	h.probe = nil
	h.mu.Unlock()
	close(p.done)
}

// PublishCommand is the command scripts wake waiters with: "spublish" when
// the hub uses sharded pub/sub, "publish" otherwise. It waits for the probe
// even when ctx ends (a release needs the answer); the probe itself is
// bounded by go-redis's timeouts.
func (h *Hub) PublishCommand(ctx context.Context) (string, error) {
	sharded, err := h.Sharded(context.WithoutCancel(ctx))
	if err != nil {
		return "", err
	}
	if sharded {
		return "spublish", nil
	}
	return "publish", nil
}

func isUnknownCommand(err error) bool {
	msg := strings.ToLower(err.Error())
	return strings.Contains(msg, "unknown command") || strings.Contains(msg, "unsupported command")
}
