package main

import (
	"os"
	"syscall"
)

// ownerUID is the owner of a file as the kernel reports it.
func ownerUID(fi os.FileInfo) int {
	return int(fi.Sys().(*syscall.Stat_t).Uid)
}
