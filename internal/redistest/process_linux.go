package redistest

import (
	"os/exec"
	"syscall"
)

// setDeathSignal makes the kernel kill the redis-server if the test binary
// dies (for example on a -timeout panic), so no server outlives its test.
func setDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
