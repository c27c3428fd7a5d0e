package redistest_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// parallel marks t parallel unless REDIS_ADDR is set: tests that share one
// external server must not flush it under each other.
func parallel(t *testing.T) {
	t.Helper()
	if os.Getenv("REDIS_ADDR") == "" {
		t.Parallel()
	}
}
