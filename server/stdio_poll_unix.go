//go:build linux || darwin

package server

import (
	"io"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// inputWaiting returns, for standard input that is a pipe or a socket, a function that
// reports without reading whether it holds data (or has ended or failed); nil for any
// other input, whose reading is then passed on unasked (see stdioLoop).
func inputWaiting(in io.Reader) func() bool {
	f, ok := in.(*os.File)
	if !ok {
		return nil
	}
	fi, err := f.Stat()
	if err != nil || fi.Mode()&(fs.ModeNamedPipe|fs.ModeSocket) == 0 {
		return nil
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return nil
	}
	return func() bool {
		waiting := true
		err := rc.Control(func(fd uintptr) {
			n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, 0)
			waiting = err != nil || n > 0 // POLLIN, or the end (POLLHUP) or an error
		})
		return waiting || err != nil
	}
}
