package httpguard

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestWriterStarted(t *testing.T) {
	for _, tc := range []struct {
		name  string
		write func(w *Writer)
		want  bool
	}{
		{"nothing", func(*Writer) {}, false},
		{"header only", func(w *Writer) { w.Header().Set("X", "1") }, false},
		{"early hints", func(w *Writer) { w.WriteHeader(http.StatusEarlyHints) }, false},
		{"status", func(w *Writer) { w.WriteHeader(http.StatusNoContent) }, true},
		{"body", func(w *Writer) { _, _ = w.Write([]byte("x")) }, true},
		{"flush", func(w *Writer) { w.Flush() }, true},
		{"read from", func(w *Writer) { _, _ = w.ReadFrom(strings.NewReader("x")) }, true},
	} {
		rec := httptest.NewRecorder()
		w := Track(rec)
		tc.write(w)
		if w.Started() != tc.want {
			t.Errorf("%s: Started = %v, want %v", tc.name, w.Started(), tc.want)
		}
	}
	rec := httptest.NewRecorder()
	w := Track(rec)
	if Track(w) != w {
		t.Error("Track of a *Writer wrapped it again, want the same *Writer")
	}
	if _, _, err := w.Hijack(); !errors.Is(err, http.ErrNotSupported) || !w.Started() {
		t.Errorf("Hijack on a writer that cannot: err %v, started %v; want http.ErrNotSupported, true", err, w.Started())
	}
	if http.NewResponseController(w).Flush(); !rec.Flushed {
		t.Error("ResponseController.Flush through the Writer did not reach the recorder")
	}
}

// pusher is a writer underneath that can push (HTTP/2).
type pusher struct {
	*httptest.ResponseRecorder
	pushed []string
}

func (p *pusher) Push(target string, _ *http.PushOptions) error {
	p.pushed = append(p.pushed, target)
	return nil
}

// TestWriterPush: a push reaches the writer underneath when it can push,
// is http.ErrNotSupported when it cannot, and never starts the response.
func TestWriterPush(t *testing.T) {
	p := &pusher{ResponseRecorder: httptest.NewRecorder()}
	var w http.ResponseWriter = Track(p)
	hp, ok := w.(http.Pusher)
	if !ok {
		t.Fatal("*Writer is not an http.Pusher")
	}
	if err := hp.Push("/app.css", nil); err != nil || len(p.pushed) != 1 || p.pushed[0] != "/app.css" {
		t.Errorf("Push through a writer that can: err %v, pushed %q; want nil, [/app.css]", err, p.pushed)
	}
	if w.(*Writer).Started() {
		t.Error("Push started the response")
	}
	if err := Track(httptest.NewRecorder()).Push("/app.css", nil); !errors.Is(err, http.ErrNotSupported) {
		t.Errorf("Push through a writer that cannot: %v, want http.ErrNotSupported", err)
	}
}
