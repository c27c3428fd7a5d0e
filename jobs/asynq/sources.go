package asynqlock

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/hibiken/asynq"

	"github.com/keylock/keylock/core"
)

// The built-in placeholder sources.
const (
	srcPayload = "payload" // {payload.<dotted.path>}: a value in the JSON payload
	srcType    = "type"    // {type}: the task type
	srcQueue   = "queue"   // {queue}: the queue the task was pulled from
)

func isBuiltinSource(name string) bool {
	return name == srcPayload || name == srcType || name == srcQueue
}

func validSourceName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || i > 0 && ('0' <= c && c <= '9' || c == '_')) {
			return false
		}
	}
	return true
}

// source resolves one placeholder for one task attempt.
type source func(r *request) (string, bool)

// sourceFor checks p against the built-in and custom sources and returns
// its resolver. Its errors end up in the start-up error, after the template
// and the placeholder.
func (c *config) sourceFor(p core.Placeholder) (source, error) {
	if fn, ok := c.sources[p.Source]; ok {
		if p.Name != "" {
			return nil, fmt.Errorf("custom source %q takes no name: write {%s}", p.Source, p.Source)
		}
		return func(r *request) (string, bool) { return fn(r.ctx, r.task) }, nil
	}
	switch p.Source {
	case srcPayload:
		if p.Name == "" {
			return nil, errors.New("needs a JSON path, e.g. {payload.order_id} or {payload.items.0.sku}")
		}
		path, err := core.ParseJSONPath(p.Name)
		if err != nil {
			return nil, err
		}
		return func(r *request) (string, bool) { return r.payloadValue(path) }, nil
	case srcType:
		if p.Name != "" {
			return nil, errors.New("takes no name: write {type}")
		}
		return func(r *request) (string, bool) { return r.task.Type(), true }, nil
	case srcQueue:
		if p.Name != "" {
			return nil, errors.New("takes no name: write {queue}")
		}
		return func(r *request) (string, bool) { return asynq.GetQueueName(r.ctx) }, nil
	}
	known := []string{srcPayload, srcType, srcQueue}
	for _, name := range slices.Sorted(maps.Keys(c.sources)) {
		known = append(known, name)
	}
	return nil, fmt.Errorf("unknown source %q (known: %s)", p.Source, strings.Join(known, ", "))
}

// request is one task attempt being resolved: the core.Resolver handed to
// Template.AppendRender.
type request struct {
	ctx     context.Context
	task    *asynq.Task
	sources []source

	// reason, when set, replaces core's generic "missing" for the
	// placeholder that stopped the rendering (rendering stops at the first
	// missing value, so it is always that one's).
	reason string
}

// Value implements core.Resolver.
func (r *request) Value(_ core.Placeholder, i int) (string, bool) { return r.sources[i](r) }
