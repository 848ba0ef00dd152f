package demo

import "syscall"

// engineProcAttr has nothing to add on Windows, where the demo's kill is
// TerminateProcess and there is no SIGTERM drain to show.
func engineProcAttr() *syscall.SysProcAttr { return nil }
