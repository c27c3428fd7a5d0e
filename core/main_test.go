package core_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any test leaves a goroutine behind
// (a Client not closed, a watchdog or pub/sub reader still running).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
