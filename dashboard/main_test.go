package dashboard_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if addr := os.Getenv(holderEnv); addr != "" {
		os.Exit(runHolder(addr)) // a holder process of the browser tests
	}
	goleak.VerifyTestMain(m)
}
