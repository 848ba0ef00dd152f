package engineproc

import "syscall"

// procAttr puts the engine in its own process group, so that a Ctrl-C in the terminal
// reaches only the parent (a demo, a benchmark, a test), which then stops the engine the
// clean way; and kills the engine if the parent itself dies, so that no orphan keeps
// retrying against clusters that no longer exist.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
