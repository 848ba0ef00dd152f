package demo

import "syscall"

// engineProcAttr puts the engine in its own process group, so that a Ctrl-C in the
// terminal reaches only the demo, which then stops the engine the clean way; and kills
// the engine if the demo itself dies, so that no orphan keeps retrying against clusters
// that no longer exist.
func engineProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
