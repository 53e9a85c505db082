// Package vfstest checks that a vfs.Storage behaves as the memory store needs, the way
// testing/fstest checks an fs.FS: every backend runs the same suite, so a new backend (a
// database, say) is held to everything the others are.
package vfstest
