package engineproc

import "syscall"

// procAttr has nothing to add on Windows, where Kill is TerminateProcess and there is
// no SIGTERM drain.
func procAttr() *syscall.SysProcAttr { return nil }
