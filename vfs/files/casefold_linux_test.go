package files_test

import (
	"os"
	"strconv"
	"syscall"
)

// closeOnExec marks every descriptor of this process but stdin, stdout and stderr
// close-on-exec, so that a daemon a test starts holds none of them: a fuzzing worker's
// pipes to its coordinator, kept open by the FUSE server, would leave the coordinator
// waiting for the worker's end for good.
func closeOnExec() {
	entries, _ := os.ReadDir("/proc/self/fd")
	for _, e := range entries {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			syscall.CloseOnExec(fd)
		}
	}
}
