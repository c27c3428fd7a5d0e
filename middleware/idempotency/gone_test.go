package idempotency_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keylock/keylock/middleware/idempotency"
)

// sendAndLeave sends one request and gives up on it after 100ms, as a
// client with a short timeout does; it returns once the handler returned
// and the key's lock was released.
func sendAndLeave(t *testing.T, e *env, url, key string, returned <-chan struct{}) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", url+"/orders", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-User-ID", "u1")
	req.Header.Set("Idempotency-Key", key)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("first: %d, want the client's timeout", resp.StatusCode)
	}
	select {
	case <-returned:
	case <-time.After(10 * time.Second):
		t.Fatal("the handler did not return within 10s")
	}
	deadline := time.Now().Add(5 * time.Second)
	for e.Held(t, "idempotency:orders:u1:"+key) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
}

// A handler that completes its work and answers after its client timed
// out (the payment went through; the client retries, as it should): the
// answer is kept, and the retry gets it instead of paying again.
func TestClientGoneAfterAnswerRunsOnce(t *testing.T) {
	e := newEnv(t)
	var runs atomic.Int32
	returned := make(chan struct{}, 2)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() { returned <- struct{}{} }()
		n := runs.Add(1)
		if n == 1 {
			<-r.Context().Done() // the charge is slow; it completes all the same
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"charge":%d}`, n)
	})
	ts := serveOrders(t, e, h)
	sendAndLeave(t, e, ts.URL, "pay", returned)
	r := must(t, do(ts, "POST", "/orders", "x", "X-User-ID: u1", "Idempotency-Key: pay"))
	if r.status != http.StatusCreated || r.body != `{"charge":1}` || !r.replayed() {
		t.Errorf("retry: %d %q replayed=%v, want the first 201 {\"charge\":1} replayed", r.status, r.body, r.replayed())
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("handler ran %d times, want 1", n)
	}
}

// A handler that answered a client that had gone, and whose body could
// not all be written (it stopped at the first failed write): the request
// ran, but its body may be cut short, so a retry is told the request
// completed without an answer to replay (409 idempotent_response_not_stored)
// rather than run again or replay a truncated body.
func TestClientGoneMidBodyRunsOnce(t *testing.T) {
	e := newEnv(t)
	var runs atomic.Int32
	returned := make(chan struct{}, 2)
	chunk := strings.Repeat("z", 32<<10)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() { returned <- struct{}{} }()
		if runs.Add(1) > 1 {
			_, _ = io.WriteString(w, "again")
			return
		}
		<-r.Context().Done()
		time.Sleep(50 * time.Millisecond) // the connection is closed by now
		w.WriteHeader(http.StatusOK)
		for range 128 { // 4 MiB, far more than socket buffers take
			if _, err := io.WriteString(w, chunk); err != nil {
				return
			}
		}
		t.Error("every write of 4 MiB to a closed connection succeeded")
	})
	ts := serveOrders(t, e, h, idempotency.WithMaxResponseBytes(8<<20))
	sendAndLeave(t, e, ts.URL, "cut", returned)
	if rec := record(t, e, "idempotency:orders:u1:cut"); strings.Contains(rec, "zzz") {
		t.Errorf("a body cut short was kept (%d bytes of record)", len(rec))
	}
	r := must(t, do(ts, "POST", "/orders", "x", "X-User-ID: u1", "Idempotency-Key: cut"))
	if r.status != http.StatusConflict || !strings.Contains(r.body, `"idempotent_response_not_stored"`) {
		t.Errorf("retry: %d, %d bytes, want 409 idempotent_response_not_stored", r.status, len(r.body))
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("handler ran %d times, want 1", n)
	}
}

// A handler that gives up when its client leaves is not kept: the retry
// runs. Whether it says so (499, the client-closed status this project
// answers with) or returns with an empty 200 — what ginlock.Idempotency
// sends for a gin handler that wrote nothing, since gin's writer holds a
// 200 from the start.
func TestClientGoneGiveUpNotKept(t *testing.T) {
	for _, status := range []int{499, http.StatusOK} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			e := newEnv(t)
			var runs atomic.Int32
			returned := make(chan struct{}, 2)
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				defer func() { returned <- struct{}{} }()
				if runs.Add(1) == 1 {
					<-r.Context().Done()
					w.WriteHeader(status)
					return
				}
				_, _ = io.WriteString(w, "done")
			})
			ts := serveOrders(t, e, h)
			key := fmt.Sprintf("gave-up-%d", status)
			sendAndLeave(t, e, ts.URL, key, returned)
			if r := must(t, do(ts, "POST", "/orders", "x", "X-User-ID: u1", "Idempotency-Key: "+key)); r.status != http.StatusOK || r.body != "done" || r.replayed() {
				t.Errorf("retry: %d %q replayed=%v, want a fresh 200 done", r.status, r.body, r.replayed())
			}
		})
	}
}
