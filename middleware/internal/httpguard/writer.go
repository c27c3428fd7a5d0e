package httpguard

import (
	"bufio"
	"io"
	"net"
	"net/http"
)

// Writer is the http.ResponseWriter a locked handler writes through: it
// notes whether the response has started, so that the middleware can
// answer for a handler that returned without writing once its lock was
// lost (see adapter.LockLost). Flush, Hijack and ReadFrom pass through to
// the writer underneath (through http.ResponseController, so it need not
// have them itself) and start the response; Push (HTTP/2 server push)
// passes through and does not start it; Unwrap gives
// http.ResponseController that writer for the rest (deadlines, full
// duplex).
type Writer struct {
	http.ResponseWriter
	started bool
}

// Track returns w as a *Writer: w itself when it already is one (an outer
// middleware tracks it), else a new Writer around it.
func Track(w http.ResponseWriter) *Writer {
	if tw, ok := w.(*Writer); ok {
		return tw
	}
	return &Writer{ResponseWriter: w}
}

// Started reports whether the response has started: a final status or a
// byte of the body was written, it was flushed, or the connection was
// hijacked.
func (w *Writer) Started() bool { return w.started }

// WriteHeader sends the status; an informational one (1xx but 101) does
// not start the response.
func (w *Writer) WriteHeader(code int) {
	if code >= 200 || code == http.StatusSwitchingProtocols {
		w.started = true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *Writer) Write(b []byte) (int, error) {
	w.started = true
	return w.ResponseWriter.Write(b)
}

// Flush sends what was written so far (http.Flusher).
func (w *Writer) Flush() {
	w.started = true
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// Hijack hands the connection to the handler (http.Hijacker); it fails
// with an error matching http.ErrNotSupported when the writer underneath
// cannot (HTTP/2).
func (w *Writer) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	w.started = true
	return http.NewResponseController(w.ResponseWriter).Hijack()
}

// ReadFrom copies r into the body, with the writer underneath's ReadFrom
// when it has one (sendfile).
func (w *Writer) ReadFrom(r io.Reader) (int64, error) {
	w.started = true
	return io.Copy(w.ResponseWriter, r)
}

// Push starts an HTTP/2 server push (http.Pusher) through the writer
// underneath; it fails with http.ErrNotSupported when that writer cannot
// (HTTP/1, or a client that turned push off), as http.Pusher says. A push
// promise does not start the response.
func (w *Writer) Push(target string, opts *http.PushOptions) error {
	if p, ok := w.ResponseWriter.(http.Pusher); ok {
		return p.Push(target, opts)
	}
	return http.ErrNotSupported
}

// Unwrap returns the writer underneath, for http.ResponseController.
func (w *Writer) Unwrap() http.ResponseWriter { return w.ResponseWriter }
