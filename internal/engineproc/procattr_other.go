//go:build unix && !linux

package engineproc

import "syscall"

// procAttr puts the engine in its own process group, so that a Ctrl-C in the terminal
// reaches only the parent, which then stops the engine the clean way.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
