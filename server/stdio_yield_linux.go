package server

import "golang.org/x/sys/unix"

// yieldThread gives the CPU to another thread that is ready to run on it, if any
// (sched_yield(2)): while the stdio loop looks for a line, that may be the client's.
func yieldThread() { unix.Syscall(unix.SYS_SCHED_YIELD, 0, 0, 0) }
