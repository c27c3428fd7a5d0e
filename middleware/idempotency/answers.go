package idempotency

import (
	"net/http"
	"strconv"

	"github.com/keylock/keylock/adapter"
	"github.com/keylock/keylock/middleware/internal/httpguard"
)

// The answers of the middleware's own (the lock's refusals are httpguard's:
// 400 for a bad scope value, 503 for Redis unreachable, 504, 499). They
// name no key and no value.
var (
	answerMissing = httpguard.Answer{Status: http.StatusBadRequest,
		Body: &httpguard.Body{Error: "idempotency_key_missing", Message: "this request needs an idempotency key header"}}
	answerRepeated = httpguard.Answer{Status: http.StatusBadRequest,
		Body: &httpguard.Body{Error: "idempotency_key_repeated", Message: "this request has more than one idempotency key header; send exactly one"}}
	answerReused = httpguard.Answer{Status: http.StatusUnprocessableEntity,
		Body: &httpguard.Body{Error: "idempotency_key_reused", Message: "the idempotency key was used with a different request"}}
	answerNotStored = httpguard.Answer{Status: http.StatusConflict,
		Body: &httpguard.Body{Error: "idempotent_response_not_stored", Message: "the request with this idempotency key completed; its response could not be kept"}}
	answerTooLarge = httpguard.Answer{Status: http.StatusRequestEntityTooLarge,
		Body: &httpguard.Body{Error: "request_too_large", Message: "request body too large for an idempotent request"}}
	answerUnreadable = httpguard.Answer{Status: http.StatusBadRequest,
		Body: &httpguard.Body{Error: "bad_request", Message: "request body could not be read"}}
	answerBadRecord = httpguard.Answer{Status: http.StatusInternalServerError,
		Body: &httpguard.Body{Error: "idempotency_record_invalid"}}
)

// inProgress is the answer to a duplicate that found its key's first
// request still running: 409 with Retry-After (the holder's TTL capped at
// adapter.MaxRetryHint, so 1).
func inProgress(err error) httpguard.Answer {
	ms := adapter.RetryHint(err).Milliseconds()
	return httpguard.Answer{Status: http.StatusConflict, RetryAfter: strconv.FormatInt((ms+999)/1000, 10),
		Body: &httpguard.Body{Error: "request_in_progress", RetryAfterMS: ms,
			Message: "a request with this idempotency key is in progress"}}
}

// replay sends the stored response, marked with ReplayedHeader.
func replay(w http.ResponseWriter, rec *record) {
	h := w.Header()
	for name, vs := range rec.Header {
		h[name] = vs
	}
	h.Set(ReplayedHeader, "true")
	w.WriteHeader(rec.Status)
	_, _ = w.Write(rec.Body)
}
