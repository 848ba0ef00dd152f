//go:build unix && !linux

package demo

import "syscall"

// engineProcAttr puts the engine in its own process group, so that a Ctrl-C in the
// terminal reaches only the demo, which then stops the engine the clean way.
func engineProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
