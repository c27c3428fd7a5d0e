package asynqlock

import (
	"errors"

	"github.com/keylock/keylock/core"
)

// payloadValue returns the value at path in the task's JSON payload, as
// core.JSONPath.Lookup resolves it: the value encoding/json would bind at
// that path, or a refusal when the payload is ambiguous there (duplicate or
// case-colliding member names), not JSON, or holds an object or array.
func (r *request) payloadValue(path *core.JSONPath) (string, bool) {
	v, err := path.Lookup(r.task.Payload())
	switch {
	case err == nil:
		return v, true
	case !errors.Is(err, core.ErrMissing):
		r.reason = "payload: " + err.Error()
	}
	return "", false
}
