//go:build !linux

package process

import "syscall"

// sysProcAttr: without Pdeathsig, the t.Cleanup kill is the only guard.
func sysProcAttr() *syscall.SysProcAttr { return nil }
