//go:build !linux

package vfs

// spareFile is Linux's unnamed file made in advance for the next creation (see
// spare_linux.go); elsewhere every creation writes a temporary file and renames it.
type spareFile struct{}

func (f *OSFs) createNew(string, []byte, bool) (error, bool) { return nil, false }

func (f *OSFs) startSpare() {}

func (f *OSFs) closeSpare() {}

func (f *OSFs) rootReopened() {}
