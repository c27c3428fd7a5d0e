package script

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// Runner is what a script runs on: a go-redis client, or a pipeline (made
// by [Pipeline] to know the SHAs).
type Runner interface {
	redis.Scripter
	Process(ctx context.Context, cmd redis.Cmder) error
}

// Argv is one script call's arguments as EVAL and EVALSHA take them: two
// slots for the command and the script (filled when the call is sent), the
// key count, the keys, then the script's arguments. Each is an interface
// value already, so a caller boxes the values it keeps across calls (a
// lock's keys, fixed arguments) once rather than on every call, as
// Scripter.EvalSha would, and the call's arguments are one slice.
type Argv []any

// NewArgv returns an Argv for nkeys keys and room for n values (keys and
// arguments) in all: append the keys, then the arguments.
func NewArgv(nkeys, n int) Argv {
	a := make(Argv, 3, 3+n)
	a[2] = nkeys
	return a
}

// Args returns the Argv of keys and args. As go-redis's EvalSha does, a
// single argument that is a []string or a []any stands for its elements.
func Args(keys []string, args ...any) Argv {
	if len(args) == 1 {
		switch v := args[0].(type) {
		case []string:
			args = make([]any, len(v))
			for i, s := range v {
				args[i] = s
			}
		case []any:
			args = v
		}
	}
	a := NewArgv(len(keys), len(keys)+len(args))
	for _, k := range keys {
		a = append(a, k)
	}
	return append(a, args...)
}

// Keys returns the keys of a.
func (a Argv) Keys() []any { return a[3 : 3+a[2].(int)] }

// clone copies a, so that its command can be sent again with other first
// slots while the first command's arguments stay as they were.
func (a Argv) clone() Argv { return append(Argv(nil), a...) }
