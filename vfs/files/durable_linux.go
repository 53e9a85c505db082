package files

import (
	"os"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// bootID names this boot of the machine: a write-ahead log written in another boot may
// hold changes that the crash (or power cut) which ended that boot kept from the disk.
var bootID = sync.OnceValue(func() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
})

// datasync flushes f's data and what is needed to read it back (fdatasync(2)).
func datasync(f *os.File) error {
	for {
		if err := unix.Fdatasync(int(f.Fd())); err != unix.EINTR {
			return err
		}
	}
}
