package asynqlock

import (
	"context"
	"errors"

	"github.com/hibiken/asynq"

	"github.com/keylock/keylock/keytmpl"
)

// attempt is one task attempt being resolved.
type attempt struct {
	ctx  context.Context
	task *asynq.Task
}

// builtinSources are the placeholder sources every rule knows:
//
//	{payload.<dotted.path>}  a value in the JSON payload (keytmpl.JSONPath)
//	{type}                   the task type
//	{queue}                  the queue the task was pulled from
var builtinSources = map[string]keytmpl.Source[*attempt]{
	"payload": keytmpl.Named("{payload.order_id} or {payload.items.0.sku}", func(name string) (keytmpl.Lookup[*attempt], error) {
		path, err := keytmpl.ParseJSONPath(name)
		if err != nil {
			return nil, err
		}
		return func(a *attempt) (string, error) {
			v, err := path.Lookup(a.task.Payload())
			if err != nil && !errors.Is(err, keytmpl.ErrMissing) {
				err = errors.New("payload: " + err.Error())
			}
			return v, err
		}, nil
	}),
	"type":  keytmpl.Bare(func(a *attempt) (string, error) { return a.task.Type(), nil }),
	"queue": keytmpl.Bare(func(a *attempt) (string, error) { return keytmpl.Present(asynq.GetQueueName(a.ctx)) }),
}
