//go:build !linux

package vfs

import (
	"os"

	"github.com/spf13/afero"
)

// dirCache is Linux's (see dircache_linux.go); elsewhere every operation goes through the
// os.Root.
type dirCache struct{}

func (c *dirCache) start()        {}
func (c *dirCache) stop()         {}
func (c *dirCache) forget(string) {}
func (c *dirCache) reset()        {}

func (f *OSFs) openAt(string, string, int, os.FileMode) (afero.File, *os.File, error, bool) {
	return nil, nil, nil, false
}
func (f *OSFs) statAt(string, bool) (os.FileInfo, error, bool) { return nil, nil, false }
func (f *OSFs) removeAt(string) (error, bool)                  { return nil, false }
func (f *OSFs) renameAt(string, string, uint) (error, bool)    { return nil, false }

const renameNoReplaceFlag = 0
