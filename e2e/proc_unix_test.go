//go:build unix

package e2e

import (
	"os/exec"
	"syscall"
)

// ownProcessGroup makes cmd the leader of a new process group, so that
// killGroup also reaches the shells Pi's bash tool starts.
func ownProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// killGroup kills the process group led by the started cmd. It is a no-op
// when the group is already gone.
func killGroup(cmd *exec.Cmd) error {
	if cmd.Process == nil {
		return nil
	}
	err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	if err == syscall.ESRCH {
		return nil
	}
	return err
}

// killPid kills one process.
func killPid(pid int) error { return syscall.Kill(pid, syscall.SIGKILL) }

// interruptGroup sends SIGINT, a terminal's Ctrl-C, to the process group
// led by the started cmd.
func interruptGroup(cmd *exec.Cmd) error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGINT) }
