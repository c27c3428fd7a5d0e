package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// stdoutSpan is the part of stdouttrace's JSON the test reads.
type stdoutSpan struct {
	Name        string
	SpanContext struct{ TraceID, SpanID string }
	Parent      struct{ TraceID, SpanID string }
	Links       []struct {
		SpanContext struct{ TraceID, SpanID string }
	}
}

// TestTraceOfABuy checks what -trace stdout shows for one buy: one trace
// with the HTTP request, the per-buyer lock, the stock step, the enqueue,
// and the task's processing with its own lock and write.
func TestTraceOfABuy(t *testing.T) {
	var out syncBuffer
	cfg := defaultAppConfig()
	cfg.Trace, cfg.Out, cfg.Quiet = "stdout", &out, true
	cfg.HTTPAddr, cfg.GRPCAddr = "127.0.0.1:0", "127.0.0.1:0"
	ready := make(chan appAddrs, 1)
	cfg.Ready = func(a appAddrs) { ready <- a }
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- runApp(ctx, cfg) }()
	var a appAddrs
	select {
	case a = <-ready:
	case err := <-errc:
		cancel()
		t.Fatalf("runApp: %v", err)
	}

	req, _ := http.NewRequest(http.MethodPost, "http://"+a.HTTP+"/api/items/1/buy", nil)
	req.Header.Set("X-User-ID", "alice")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		<-errc
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Errorf("buy: %s, want 202", resp.Status)
	}
	// Wait for the task to run, then stop the app, which flushes the spans.
	deadline := time.Now().Add(15 * time.Second)
	for {
		r, err := http.Get("http://" + a.HTTP + "/api/items/1")
		var it struct{ Created int }
		if err == nil {
			_ = json.NewDecoder(r.Body).Decode(&it)
			r.Body.Close()
		}
		if it.Created == 1 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatalf("runApp: %v", err)
	}

	// The output is a stream of JSON documents: spans, then metrics.
	var spans []stdoutSpan
	dec := json.NewDecoder(strings.NewReader(out.String()))
	for {
		var s stdoutSpan
		if err := dec.Decode(&s); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decode -trace stdout output: %v\n%s", err, out.String())
		}
		if s.Name != "" {
			spans = append(spans, s)
		}
	}
	find := func(name, traceID string) *stdoutSpan {
		for i := range spans {
			if spans[i].Name == name && (traceID == "" || spans[i].SpanContext.TraceID == traceID) {
				return &spans[i]
			}
		}
		var names []string
		for _, s := range spans {
			names = append(names, s.Name+"@"+s.SpanContext.TraceID[:8])
		}
		t.Fatalf("no span %q in trace %q; spans: %v", name, traceID, names)
		return nil
	}

	httpSpan := find("POST /api/items/:item/buy", "")
	buyTrace := httpSpan.SpanContext.TraceID
	if acq := find("keylock.acquire", buyTrace); acq.Parent.SpanID != httpSpan.SpanContext.SpanID {
		t.Errorf("the buy's keylock.acquire span is not a child of the HTTP span")
	}
	find("shop.Reserve", buyTrace)
	enqueue := find("asynq.enqueue order:create", buyTrace)
	find("keylock.release", buyTrace)

	// The task's processing continues the buy's trace (the context travels
	// in the task headers): a child of the enqueue span.
	process := find("asynq.process order:create", buyTrace)
	if process.Parent.SpanID != enqueue.SpanContext.SpanID {
		t.Errorf("the task's span has parent %s, want the enqueue span %s", process.Parent.SpanID, enqueue.SpanContext.SpanID)
	}
	var taskLock bool
	for _, s := range spans {
		taskLock = taskLock || (s.Name == "keylock.acquire" && s.Parent.SpanID == process.SpanContext.SpanID)
	}
	if !taskLock {
		t.Errorf("no keylock.acquire span under the task's span")
	}
	find("shop.Create", buyTrace)
}
