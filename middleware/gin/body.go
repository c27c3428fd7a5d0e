package ginlock

import (
	"bytes"
	"fmt"
	"io"
	"net/http"

	"github.com/gin-gonic/gin"
)

// readBody reads the request body for the {json.*} placeholders, at most
// maxBody bytes, and puts it back so the handler can read (and bind) it
// again. A body that an earlier middleware already read with
// c.ShouldBindBodyWith is taken from the gin context instead.
func (r *request) readBody() {
	r.bodyRead = true
	if b, ok := r.c.Get(gin.BodyBytesKey); ok {
		if body, ok := b.([]byte); ok {
			r.setBody(body)
			return
		}
	}
	req := r.c.Request
	if req.Body == nil || req.Body == http.NoBody {
		r.bodyWhy = "missing (empty request body)"
		return
	}
	limit := r.m.cfg.maxBody
	body, eof, err := readBounded(req.Body, req.ContentLength, limit)
	if eof {
		rb := &replayBody{orig: req.Body}
		rb.Reset(body)
		req.Body = rb
	} else {
		req.Body = &partBody{Reader: io.MultiReader(bytes.NewReader(body), req.Body), orig: req.Body}
	}
	switch {
	case int64(len(body)) > limit:
		r.bodyWhy = fmt.Sprintf("request body longer than %d bytes", limit)
	case err != nil:
		r.bodyWhy = "request body could not be read"
	default:
		r.setBody(body)
	}
}

func (r *request) setBody(body []byte) {
	if len(bytes.TrimSpace(body)) == 0 {
		r.bodyWhy = "missing (empty request body)"
		return
	}
	r.body = body
}

// readBounded reads rc until EOF or until it has more than limit bytes.
// hint is the expected length (Content-Length, or -1), used to size the
// buffer once. eof reports that the whole body was read.
func readBounded(rc io.Reader, hint, limit int64) (buf []byte, eof bool, err error) {
	size := int64(512)
	if hint >= 0 {
		size = min(hint, limit) + 1 // +1: room to see EOF without growing
	}
	buf = make([]byte, 0, min(size, limit+1))
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		room := min(int64(cap(buf)), limit+1)
		n, err := rc.Read(buf[len(buf):room])
		buf = buf[:len(buf)+n]
		switch {
		case int64(len(buf)) > limit:
			return buf, false, nil
		case err == io.EOF:
			return buf, true, nil
		case err != nil:
			return buf, false, err
		}
	}
}

// replayBody is a fully read request body put back for the handler. Close
// closes the original body.
type replayBody struct {
	bytes.Reader
	orig io.Closer
}

func (b *replayBody) Close() error { return b.orig.Close() }

// partBody is a partly read request body (too long, or a read failed): the
// bytes read, then the rest of the original.
type partBody struct {
	io.Reader
	orig io.Closer
}

func (b *partBody) Close() error { return b.orig.Close() }
