package asynqtrace_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/jobs/internal/asynqtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// env is asynqtest's redis-server shared by the locks and asynq.
type env = asynqtest.Env

func newEnv(t *testing.T, opts ...core.Option) *env { return asynqtest.New(t, opts...) }
