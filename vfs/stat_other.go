//go:build !linux

package vfs

import "os"

// statPath is os.Stat. (On Linux it leaves the times out; see stat_linux.go.)
func statPath(name string) (os.FileInfo, error) { return os.Stat(name) }

// sameFile is os.SameFile.
func sameFile(a, b os.FileInfo) bool { return os.SameFile(a, b) }

// fileStat is f.Stat().
func fileStat(f *os.File) (os.FileInfo, error) { return f.Stat() }
