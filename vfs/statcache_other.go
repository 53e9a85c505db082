//go:build !linux

package vfs

// statCache is Linux's only (it needs inotify): elsewhere every listing stats its entries.
type statCache struct{}

func (f *OSFs) statCache() (*statCache, uint64) { return nil, 0 }

func (c *statCache) entries(_ int, _ uint64, readNames func() ([]string, error), stat statFunc) ([]Entry, error) {
	return statNames(readNames, stat)
}
