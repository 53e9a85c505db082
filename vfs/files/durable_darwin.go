package files

import (
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// bootID names this boot of the machine (see durable_linux.go).
var bootID = sync.OnceValue(func() string {
	id, err := unix.Sysctl("kern.bootsessionuuid")
	if err != nil {
		return ""
	}
	return id
})

// datasync flushes f to the disk itself (F_FULLFSYNC: macOS's fsync leaves it in the
// drive's cache).
func datasync(f *os.File) error { return f.Sync() }
