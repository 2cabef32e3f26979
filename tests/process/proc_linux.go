//go:build linux

package process

import "syscall"

// sysProcAttr makes the kernel SIGKILL a node when the test binary dies,
// so that a test binary killed by its -timeout leaves no kvnode behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
