package files

import (
	"errors"
	"os"
	"strconv"
	"sync"
	"syscall"
	"unsafe"

	"github.com/spf13/afero"
	"golang.org/x/sys/windows"
	"golang.org/x/sys/windows/registry"
)

// bootID names this boot of the machine (see durable_linux.go): the boot counter Windows
// keeps in the registry, which every start of the system increments.
var bootID = sync.OnceValue(func() string {
	k, err := registry.OpenKey(registry.LOCAL_MACHINE, `SYSTEM\CurrentControlSet\Control\Session Manager\Memory Management\PrefetchParameters`, registry.QUERY_VALUE)
	if err != nil {
		return ""
	}
	defer k.Close()
	n, _, err := k.GetIntegerValue("BootId")
	if err != nil {
		return ""
	}
	return "windows-" + strconv.FormatUint(n, 10)
})

// datasync flushes f (FlushFileBuffers).
func datasync(f *os.File) error { return f.Sync() }

// unlinked reports whether f lost its last name (removed, or replaced by a rename).
func unlinked(f afero.File, _ os.FileInfo) bool {
	of, ok := f.(osFile)
	if !ok {
		return false
	}
	var info struct {
		AllocationSize, EndOfFile int64
		NumberOfLinks             uint32
		DeletePending, Directory  bool
	}
	err := windows.GetFileInformationByHandleEx(windows.Handle(of.Fd()), windows.FileStandardInfo, (*byte)(unsafe.Pointer(&info)), uint32(unsafe.Sizeof(info)))
	return err != nil || info.NumberOfLinks == 0 || info.DeletePending
}

// heldOpen reports whether err is Windows refusing to rename, replace or remove a file that
// another program has open without sharing deletion (see retryWhile).
func heldOpen(err error) bool {
	var errno syscall.Errno
	return errors.As(err, &errno) && (errno == windows.ERROR_ACCESS_DENIED ||
		errno == windows.ERROR_SHARING_VIOLATION || errno == windows.ERROR_LOCK_VIOLATION)
}
