//go:build !linux

package vfs

// statCache is Linux's only (it needs inotify): elsewhere every listing stats its entries.
type statCache struct{}

func (f *OSFs) statCache() *statCache { return nil }

func (c *statCache) close() {}

func (c *statCache) entries(_ int, names []string, stat statFunc) []Entry {
	return statAll(names, stat)
}
