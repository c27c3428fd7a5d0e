//go:build !linux

package redistest

import "os/exec"

// setDeathSignal is a no-op where the kernel has no parent-death signal.
func setDeathSignal(*exec.Cmd) {}
