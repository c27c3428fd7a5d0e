package httpguard

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/keylock/keylock/adapter"
	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/keytmpl"
)

// StatusClientClosedRequest (499, nginx's convention) is the status given
// to a request whose client went away while it waited for the lock.
const StatusClientClosedRequest = 499

// Status is the HTTP status of a refusal of class c: 400 for the caller's
// invalid key, 500 for a failing source of the server's, 504 and 499 for
// the request's own deadline or cancellation, 409 for a busy key, and 503
// for Redis unreachable.
func Status(c core.ErrorClass) int {
	switch c {
	case core.ClassBusy:
		return http.StatusConflict
	case core.ClassInvalid:
		return http.StatusBadRequest
	case core.ClassInternal:
		return http.StatusInternalServerError
	case core.ClassDeadline:
		return http.StatusGatewayTimeout
	case core.ClassCanceled:
		return StatusClientClosedRequest
	}
	return http.StatusServiceUnavailable
}

// Body is the JSON body of the default answers; ginlock and httplock send
// the same bytes.
type Body struct {
	Error        string `json:"error"`
	KeyTemplate  string `json:"key_template,omitempty"`
	RetryAfterMS int64  `json:"retry_after_ms,omitempty"`
	Placeholder  string `json:"placeholder,omitempty"`
	Reason       string `json:"reason,omitempty"`
	Message      string `json:"message,omitempty"`
}

// Answer is a default answer: a status, an optional Retry-After (whole
// seconds, "" for none) and an optional JSON body.
type Answer struct {
	Status     int
	RetryAfter string
	Body       *Body
}

// Busy is the default answer to a busy key: 409 (429 for a semaphore) with
// Retry-After and {"error":"locked","key_template":…,"retry_after_ms":…}
// ("concurrency_limit" for a semaphore). It names the template, never the
// rendered key.
func Busy(err error, template string, semaphore bool) Answer {
	ms := adapter.RetryHint(err).Milliseconds()
	a := Answer{Status: http.StatusConflict, RetryAfter: strconv.FormatInt((ms+999)/1000, 10),
		Body: &Body{Error: "locked", KeyTemplate: template, RetryAfterMS: ms}}
	if semaphore {
		a.Status, a.Body.Error = http.StatusTooManyRequests, "concurrency_limit"
	}
	return a
}

// Error is the default answer to the other refusals, by status: 400 with
// the placeholder and reason of a *keytmpl.KeyError (they name no value,
// so they are safe to show), 500, 504 and 503 with a code only (causes,
// addresses and Redis messages are not for the client; "lock_lost" for a
// lock lost while the handler ran, core.ErrLockLost), 499 without a body.
func Error(status int, err error) Answer {
	a := Answer{Status: status}
	switch status {
	case http.StatusBadRequest:
		a.Body = &Body{Error: "invalid_key", Message: "invalid lock key"}
		if ke, ok := errors.AsType[*keytmpl.KeyError](err); ok {
			a.Body.Placeholder, a.Body.Reason, a.Body.Message = ke.Placeholder.String(), ke.Reason, ke.Error()
		}
	case http.StatusInternalServerError:
		a.Body = &Body{Error: "lock_source_failed"}
	case http.StatusGatewayTimeout:
		a.Body = &Body{Error: "lock_timeout"}
	case http.StatusServiceUnavailable:
		a.Body = &Body{Error: "lock_unavailable"}
		if errors.Is(err, core.ErrLockLost) {
			a.Body.Error = "lock_lost" // while the handler ran, which did not answer
		}
	}
	return a
}

// Write sends a on w.
func (a Answer) Write(w http.ResponseWriter) {
	h := w.Header()
	if a.RetryAfter != "" {
		h.Set("Retry-After", a.RetryAfter)
	}
	if a.Body == nil {
		w.WriteHeader(a.Status)
		return
	}
	b, _ := json.Marshal(a.Body) // a Body of strings and an int always marshals
	h.Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(a.Status)
	_, _ = w.Write(b)
}
