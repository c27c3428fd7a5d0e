package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// refusals is a go-redis hook that remembers the commands the server
// refused (answered with an error reply), so that the CLI's error message
// can name the command: behind a proxy or an ACL that refuses, say, SCAN or
// PUBSUB, "ERR unknown command" alone does not say which. It only records;
// errors pass through unchanged (core matches on them, e.g. NOSCRIPT).
type refusals struct {
	mu   sync.Mutex
	last map[string]string // error text → command name
}

var _ redis.Hook = (*refusals)(nil)

func (r *refusals) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) { return next(ctx, network, addr) }
}

func (r *refusals) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		r.note(cmd, err)
		return err
	}
}

func (r *refusals) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, c := range cmds {
			r.note(c, c.Err())
		}
		return err
	}
}

func (r *refusals) note(cmd redis.Cmder, err error) {
	if err == nil || !isRefusal(err) || redis.HasErrorPrefix(err, "NOSCRIPT") {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.last == nil {
		r.last = map[string]string{}
	}
	r.last[err.Error()] = commandName(cmd)
}

// commandName is a command's name as operators know it: "PUBSUB NUMSUB",
// "EVALSHA", "SCAN".
func commandName(cmd redis.Cmder) string {
	args := cmd.Args()
	name := strings.ToUpper(cmd.Name())
	if len(args) > 1 {
		if sub, ok := args[1].(string); ok {
			switch name {
			case "PUBSUB", "CLIENT", "SCRIPT", "CLUSTER", "CONFIG", "SENTINEL":
				name += " " + strings.ToUpper(sub)
			}
		}
	}
	return name
}

// explain prefixes err with the command the server refused, when err
// carries the text of a refusal the hook saw.
func (r *refusals) explain(err error) error {
	if r == nil || err == nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	msg := err.Error()
	for text, name := range r.last {
		if strings.Contains(msg, text) {
			return &refusedError{cmd: name, err: err}
		}
	}
	return err
}

// refusedError says which command the server refused.
type refusedError struct {
	cmd string
	err error
}

func (e *refusedError) Error() string {
	return fmt.Sprintf("the server refused %s: %s", e.cmd, errorText(e.err))
}

func (e *refusedError) Unwrap() error { return e.err }

// errUsage marks an error in the flags (exit status 2).
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func errUsage(msg string) error { return &usageError{msg} }

func isUsage(err error) bool {
	var u *usageError
	return errors.As(err, &u)
}
