package redistest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// The harness talks to redis-server with this tiny RESP2 client rather than
// go-redis: a probe must not retry, log, or leave pool goroutines behind.

// respError is an error reply (-ERR ...) from the server.
type respError string

func (e respError) Error() string { return "redis: " + string(e) }

// do sends one command to addr on a fresh connection and returns the reply:
// string (simple or bulk), int64, nil (null), []any (array), or an error.
// The whole exchange must finish within timeout.
func do(addr string, timeout time.Duration, args ...string) (any, error) {
	conn, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(timeout)); err != nil {
		return nil, err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(conn, b.String()); err != nil {
		return nil, err
	}
	reply, err := readReply(bufio.NewReader(conn))
	if err != nil {
		return nil, err
	}
	if e, ok := reply.(respError); ok {
		return nil, e
	}
	return reply, nil
}

// doString is do for commands whose reply is a string.
func doString(addr string, timeout time.Duration, args ...string) (string, error) {
	reply, err := do(addr, timeout, args...)
	if err != nil {
		return "", err
	}
	s, ok := reply.(string)
	if !ok {
		return "", fmt.Errorf("%s: got reply %T, want a string", args[0], reply)
	}
	return s, nil
}

// readReply reads one RESP2 reply. Error replies are returned as a respError
// value (not as the error) so that errors nested in arrays survive.
func readReply(r *bufio.Reader) (any, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return nil, errors.New("empty RESP line")
	}
	kind, rest := line[0], line[1:]
	switch kind {
	case '+':
		return rest, nil
	case '-':
		return respError(rest), nil
	case ':':
		return strconv.ParseInt(rest, 10, 64)
	case '$':
		n, err := strconv.Atoi(rest)
		if err != nil || n < 0 {
			return nil, err // a null bulk string is nil, nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(rest)
		if err != nil || n < 0 {
			return nil, err
		}
		arr := make([]any, n)
		for i := range arr {
			if arr[i], err = readReply(r); err != nil {
				return nil, err
			}
		}
		return arr, nil
	default:
		return nil, fmt.Errorf("unexpected RESP type %q", kind)
	}
}

// infoField returns the value of field in an INFO or CLUSTER INFO reply.
func infoField(info, field string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return ""
}
