package idempotency

import (
	"net/http"
)

// capture passes a handler's response through to the client as it is
// written, and keeps a copy to store: the status, the replayed headers as
// they were when the status was sent, and the body up to max bytes.
type capture struct {
	w          http.ResponseWriter
	replay     []string
	max        int
	status     int // 0 until the status is sent
	header     http.Header
	body       []byte
	wrote      bool // the body is not empty
	overCap    bool // the body was longer than max
	failed     bool // a write to the client failed: the body kept may be cut short
	retryAfter bool // a Retry-After header went with the status
}

func (c *capture) Header() http.Header { return c.w.Header() }

// WriteHeader records the first final status (1xx answers pass through).
func (c *capture) WriteHeader(code int) {
	if c.status == 0 && (code < 100 || code > 199) {
		c.status = code
		c.keepHeaders()
	}
	c.w.WriteHeader(code)
}

// keepHeaders copies the replayed headers as they are now, and notes
// whether a Retry-After goes with them.
func (c *capture) keepHeaders() {
	h := c.w.Header()
	_, c.retryAfter = h["Retry-After"]
	for _, name := range c.replay {
		if vs, ok := h[name]; ok {
			if c.header == nil {
				c.header = make(http.Header, len(c.replay))
			}
			c.header[name] = append([]string(nil), vs...)
		}
	}
}

func (c *capture) Write(b []byte) (int, error) {
	if c.status == 0 {
		c.WriteHeader(http.StatusOK)
	}
	c.wrote = c.wrote || len(b) > 0
	if !c.overCap {
		if len(c.body)+len(b) > c.max {
			c.overCap, c.body = true, nil
		} else {
			c.body = append(c.body, b...)
		}
	}
	n, err := c.w.Write(b)
	if err != nil {
		c.failed = true
	}
	return n, err
}

// Flush sends what was written so far (http.Flusher).
func (c *capture) Flush() {
	if c.status == 0 {
		c.WriteHeader(http.StatusOK)
	}
	_ = http.NewResponseController(c.w).Flush()
}

// Unwrap gives http.ResponseController the writer underneath.
func (c *capture) Unwrap() http.ResponseWriter { return c.w }

// done returns the status the client got: the recorded one, or 200 for a
// handler that wrote nothing (net/http sends 200 then).
func (c *capture) done() int {
	if c.status == 0 {
		c.status = http.StatusOK
		c.keepHeaders()
	}
	return c.status
}
