//go:build !unix

package vfs

// OpenDir opens the directory name for a walk by names (the walk by descriptors of
// list_unix.go needs openat).
func (f *OSFs) OpenDir(name string) (DirHandle, error) { return openNamedDir(f, name) }
