//go:build !unix

package e2e

import (
	"os"
	"os/exec"
)

// ownProcessGroup is a no-op where process groups are not available.
func ownProcessGroup(cmd *exec.Cmd) {}

// killGroup kills the started process itself.
func killGroup(cmd *exec.Cmd) error {
	if cmd.Process == nil {
		return nil
	}
	return cmd.Process.Kill()
}

// killPid kills one process.
func killPid(pid int) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return p.Kill()
}

// interruptGroup interrupts the started process itself.
func interruptGroup(cmd *exec.Cmd) error { return cmd.Process.Signal(os.Interrupt) }
